#!/usr/bin/env python3
"""Function length check: no function body in the libraries, the CLI or the examples is longer
than the limit (120 lines) unless scripts/function-length.allow names it and says why.

A function here is every body at namespace or class scope: free functions, member functions
defined in or out of their class, namespace-scope lambdas. A lambda or local class inside a
function counts toward that function. Length = lines from the body's `{` to its `}`, both
included. The parser is a brace matcher that knows C++'s comments, strings (raw ones too),
character literals and preprocessor lines; it keeps the first branch of each #if/#ifdef (the
code of an `#if 0` is skipped), so both branches' braces are never counted twice.

Usage: scripts/function-length.py [--limit N] [--allow FILE] [--list] [PATH...]
  PATHs default to the libraries, accelerate/cli and examples/ (files *.cpp *.h *.cu *.cuh).
  --list prints every function over the limit (allowed or not) and the longest ten.
Exit status 0 when every function over the limit is allowed, 1 otherwise (naming each one),
2 on bad usage or an allow-list entry that names no function over the limit (a stale entry).
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PATHS = [
    "util", "core", "kernels", "autograd", "nn", "optim", "amp", "data", "dist", "models",
    "accelerate", "examples",
]
EXTENSIONS = (".cpp", ".h", ".hpp", ".cc", ".cu", ".cuh")


class ParseError(Exception):
    pass


def blank(s):
    """s with every character but newlines replaced by spaces (keeps line numbers)."""
    return re.sub(r"[^\n]", " ", s)


def strip_code(text):
    """Comments, string and character literals blanked (a string becomes "" padded with spaces)."""
    out = []
    i, n = 0, len(text)
    raw_start = re.compile(r'(?:u8|u|U|L)?R"([^ ()\\\t\n]{0,16})\(')
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(blank(text[i:j]))
            i = j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(blank(text[i:j]))
            i = j
        elif c == "R" or (c in "uUL8" and raw_start.match(text, i)):
            m = raw_start.match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                end = text.find(")" + m.group(1) + '"', m.end())
                end = n if end < 0 else end + len(m.group(1)) + 2
                out.append('""' + blank(text[i + 2:end]))
                i = end
            else:
                out.append(c)
                i += 1
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # A ' after a digit or letter is a digit separator (1'000) or part of a name: not a literal.
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + c + blank(text[i + 2:j]) if j - i >= 2 else c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_preprocessor(text):
    """Preprocessor lines blanked; of each #if chain only the first taken branch kept."""
    lines = text.split("\n")
    out = []
    stack = []  # per open #if: [keeping this branch, a branch was already kept]
    cont = False
    for line in lines:
        continued, directive = cont, line.lstrip().startswith("#")
        cont = (continued or directive) and line.rstrip().endswith("\\")
        live = all(keep for keep, _ in stack)
        if directive and not continued:
            m = re.match(r"\s*#\s*(\w*)\s*(.*)", line)
            word = m.group(1)
            if word in ("if", "ifdef", "ifndef"):
                zero = word == "if" and re.match(r"0\s*$", m.group(2)) is not None
                stack.append([not zero, not zero])
            elif word in ("elif", "else") and stack:
                stack[-1] = [not stack[-1][1], True]
            elif word == "endif" and stack:
                stack.pop()
            out.append("")
        elif continued:
            out.append("")
        else:
            out.append(line if live else "")
    return "\n".join(out)


CLASS_HEAD = re.compile(
    r"^(?:typedef\s+)?(?:enum\s+(?:class|struct)\b|class\b|struct\b|union\b|enum\b)"
    r"(?:\s*\[\[[^\]]*\]\])?(?:\s*alignas\s*\([^)]*\))?"
    r"(?:\s*[\w:]+(?:\s*<.*>)?)?\s*(?:final\b)?\s*(?::[^{]*)?$",
    re.S,
)
ACCESS = re.compile(r"\b(?:public|private|protected)\s*:(?!:)")
QUALIFIERS = re.compile(
    r"^(?:\s*(?:const|volatile|noexcept(?:\s*\([^)]*\))?|override|final|mutable|constexpr|&&|&|"
    r"__attribute__\s*\(\(.*\)\)|->.*|requires\b.*|try))*\s*$",
    re.S,
)


def strip_template_prefix(head):
    """`template <...>` prefixes (balanced angle brackets) removed from a declaration's head."""
    while True:
        m = re.match(r"\s*template\s*<", head)
        if not m:
            return head.strip()
        depth, i = 1, m.end()
        while i < len(head) and depth:
            depth += {"<": 1, ">": -1}.get(head[i], 0)
            i += 1
        head = head[i:]
        head = re.sub(r"^\s*requires\b[^;{]*?(?=\b(?:class|struct|union|auto|void|inline|static)\b)", "", head)


def top_level_close(head):
    """Index of the last `)` at paren depth 0 in head, and whether every paren is closed."""
    depth, last = 0, -1
    for i, c in enumerate(head):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                last = i
    return last, depth == 0


def classify(head):
    """What a `{` at namespace or class scope opens, from the text before it: namespace, class,
    function, init (braces inside a declaration's head: a constructor's member initialiser, a
    default argument), or other (a variable's initialiser, an enum's body)."""
    head = ACCESS.sub(" ", head).strip()
    if re.search(r"\bnamespace\b", head) or re.match(r'^extern\s*""$', head):
        return "namespace"
    body = strip_template_prefix(head)
    if CLASS_HEAD.match(body):
        return "other" if body.startswith("enum") else "class"
    last, closed = top_level_close(body)
    if not closed:
        return "init"  # a brace inside parentheses (a default argument, an argument): part of the head
    if last < 0:
        # A lambda without a parameter list, `[x] {`, is a function; else an initialiser.
        return "function" if re.search(r"\]\s*(?:mutable\s*)?$", body) else "other"
    rest = body[last + 1:]
    ctor = re.match(r"\s*(?:noexcept\s*)?:(?!:)", rest)
    if ctor:
        # A constructor's initialiser list: `: a_{x}` opens a member's braces, `: a_(x) {` the body.
        return "function" if re.search(r"[)}]\s*$", rest) else "init"
    if QUALIFIERS.match(rest):
        return "function"
    return "other"


def functions(path):
    """(name, first line, length in lines) of every function body in the file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = strip_preprocessor(strip_code(f.read()))
    found = []
    # Scopes: each is (kind, start offset, head start offset). Only namespace and class scopes
    # are parsed for declarations; anything else is skipped to its matching brace.
    stack = []
    head_start = 0
    i, n = 0, len(text)
    line_at = [0]
    for k, c in enumerate(text):
        if c == "\n":
            line_at.append(k + 1)

    def line_of(offset):
        lo, hi = 0, len(line_at) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if line_at[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def skip_block(start):
        """Offset just past the `}` matching the `{` at start."""
        depth, j = 0, start
        while j < n:
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return n

    init_head = None
    while i < n:
        c = text[i]
        if c == ";":
            head_start = i + 1
            init_head = None
        elif c == "{":
            head = text[head_start if init_head is None else init_head:i]
            kind = classify(head)
            if kind in ("namespace", "class"):
                stack.append(kind)
                head_start = i + 1
                init_head = None
            elif kind == "init":
                init_head = head_start if init_head is None else init_head
                i = skip_block(i)
                continue
            else:
                end = skip_block(i)
                if kind == "function":
                    name = function_name(head)
                    found.append((name, line_of(i), line_of(end - 1) - line_of(i) + 1))
                i = end
                head_start = i
                init_head = None
                continue
        elif c == "}":
            if not stack:
                raise ParseError(f"{path}:{line_of(i)}: a }} that closes nothing (unbalanced braces after the preprocessor?)")
            stack.pop()
            head_start = i + 1
            init_head = None
        i += 1
    if stack:
        raise ParseError(f"{path}: {len(stack)} scope(s) still open at the end of the file")
    return found


def function_name(head):
    """The declared name from a function head: the word (with its qualifiers) before the last
    top-level parameter list, `operator...` included; NAME for a lambda `auto NAME = [..](..)`."""
    head = strip_template_prefix(ACCESS.sub(" ", head))
    m = re.search(r"([\w:~]+)\s*=\s*\[", head)
    if m:
        return m.group(1)
    depth, open_at = 0, -1
    first_close = next((j for j in range(len(head)) if head[j] == ")" and head[:j + 1].count("(") == head[:j + 1].count(")")), -1)
    if first_close >= 0 and re.match(r"\s*(?:noexcept\s*)?:(?!:)", head[first_close + 1:]):
        head = head[:first_close + 1]  # a constructor: its name is before the initialiser list
    last, _ = top_level_close(head)
    for j in range(last, -1, -1):
        if head[j] == ")":
            depth += 1
        elif head[j] == "(":
            depth -= 1
            if depth == 0:
                open_at = j
                break
    before = head[:open_at].rstrip() if open_at >= 0 else head
    m = re.search(r"((?:[\w~]+\s*(?:<[^<>]*>)?\s*::\s*)*(?:operator\s*(?:\(\)|[^\w\s(]+|\w+)|~?\w+))\s*$", before)
    return re.sub(r"\s+", "", m.group(1)) if m else before.split()[-1] if before.split() else "?"


def source_files(paths):
    for p in paths:
        full = os.path.join(ROOT, p) if not os.path.isabs(p) else p
        if os.path.isfile(full):
            yield full
            continue
        for dirpath, dirnames, filenames in os.walk(full):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith(EXTENSIONS):
                    yield os.path.join(dirpath, f)


def read_allow_list(path):
    """{(file, function): reason}; lines `FILE FUNCTION  # why`, blank lines and comments skipped.
    An entry without a reason is an error: the list says why each function may stay long."""
    allowed = {}
    if not path:
        return allowed
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            entry, _, why = line.partition("#")
            if not entry.strip():
                continue
            parts = entry.split()
            if len(parts) != 2 or not why.strip():
                sys.exit(f"function-length: {path}:{number}: want 'FILE FUNCTION  # why', got: {line.strip()}")
            allowed[(parts[0], parts[1])] = why.strip()
    return allowed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=120)
    ap.add_argument("--allow", default=os.path.join(ROOT, "scripts", "function-length.allow"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("paths", nargs="*")
    args = ap.parse_args()
    allow_name = os.path.relpath(args.allow, ROOT) if os.path.abspath(args.allow).startswith(ROOT + os.sep) else args.allow
    allowed = read_allow_list(args.allow if os.path.exists(args.allow) else None)
    paths = args.paths or DEFAULT_PATHS
    long_ones, everything, files = [], [], 0
    for path in source_files(paths):
        files += 1
        rel = os.path.relpath(path, ROOT)
        try:
            found = functions(path)
        except ParseError as e:
            sys.exit(f"function-length: cannot measure {e}")
        for name, line, length in found:
            everything.append((length, rel, line, name))
            if length > args.limit:
                long_ones.append((rel, line, name, length))
    if files == 0:
        sys.exit(f"function-length: no C++ files under {' '.join(paths)}")
    bad = [f for f in long_ones if (f[0], f[2]) not in allowed]
    used = {(f[0], f[2]) for f in long_ones}
    if args.list:
        for length, rel, line, name in sorted(everything, reverse=True)[:10]:
            print(f"  {length:5d}  {rel}:{line}  {name}")
    for rel, line, name, length in long_ones:
        if (rel, name) in allowed:
            print(f"function-length: {rel}:{line}: {name} is {length} lines (allowed: {allowed[(rel, name)]})")
    for rel, line, name, length in bad:
        print(f"function-length: {rel}:{line}: {name} is {length} lines, over the limit of {args.limit}")
    if bad:
        print(f"function-length: split each into named steps (a function a reader can jump to per phase), "
              f"or add 'FILE FUNCTION  # why' to {allow_name} when it must stay whole")
        return 1
    # Only a whole-tree run can tell a stale entry (one whose function is now short or gone).
    stale = [k for k in allowed if k not in used] if not args.paths else []
    for rel, name in stale:
        print(f"function-length: {allow_name}: {rel} {name} is no longer over the "
              f"limit (or gone): remove the entry")
    if stale:
        return 2
    print(f"function-length: {len(everything)} functions in {files} files, none over {args.limit} lines "
          f"but the {len(long_ones)} allowed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
