#!/bin/sh
# Doxygen INPUT_FILTER (docs/api/Doxyfile.in): brisk's headers comment their declarations with
# `//`, and Doxygen reads only `///`. A line that is only a `//` comment becomes `///` (the block
# documents the declaration below it) and a `// ...` after a member declaration (`int x = 0;  // why`)
# becomes `///< ...`. Outside `code spans` the characters Doxygen would read as markup
# (\ @ < > & # and a leading list marker) are escaped, so a comment shows as written.
# Lines keep their numbers, so Doxygen's messages point at the header's real lines.
exec awk '
function esc(s,   out, parts, n, i) {
  n = split(s, parts, "`")
  out = ""
  for (i = 1; i <= n; i++) {
    if (i % 2 == 1) {
      gsub(/\\/, "\\\\\\\\", parts[i]); gsub(/@/, "\\@", parts[i]); gsub(/</, "\\<", parts[i])
      gsub(/>/, "\\>", parts[i]); gsub(/&/, "\\\\\\&", parts[i]); gsub(/#/, "\\#", parts[i])
      gsub(/%/, "\\%", parts[i]); gsub(/\.\./, "\\.\\.", parts[i])
    }
    out = out parts[i] (i < n ? "`" : "")
  }
  return out
}
/^[ \t]*\/\/[^\/]/ || /^[ \t]*\/\/$/ {
  match($0, /^[ \t]*\/\//)
  text = substr($0, RLENGTH + 1)
  if (text ~ /^ *(---|===)/) { print; next }  # a section rule, not documentation
  if (text ~ /^ *(-|\.|\+|\*|[0-9]+\.) /) text = " \\" substr(text, 2)
  print substr($0, 1, RLENGTH) "/" esc(text)
  next
}
/;[ \t]+\/\/ / && $0 !~ /"/ {
  i = index($0, "; ")
  j = index(substr($0, i), "//")
  code = substr($0, 1, i + j - 2)
  print code "///< " esc(substr($0, i + j + 2))
  next
}
{ print }
' "$1"
