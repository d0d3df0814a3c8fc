"""Reads CMake's compile_commands.json for the clang check scripts (clang-syntax.sh,
clang-portable.sh): each entry's compiler command without its output file and without ccache,
ready for a caller to add -fsyntax-only or -o /dev/null."""
import json
import re
import shlex


def entries(path, pattern=None):
    """The entries of compile_commands.json at `path`, those whose file matches `pattern` if given."""
    with open(path) as f:
        all_entries = json.load(f)
    return [e for e in all_entries if pattern is None or re.search(pattern, e["file"])]


def command(entry):
    """The entry's compiler command as a list, without `-o FILE` and without a ccache launcher."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "-o":
            skip = True
            continue
        out.append(a)
    if out[0].endswith("ccache"):
        out = out[1:]
    return out
