#!/usr/bin/env python3
"""The function-size rule of docs/ARCHITECTURE.md ("Rules that keep it simple"), checked on
the folders given (src/backends and src/passes): no function — a kernel, a constructor, a
pass, a device kernel — longer than 80 lines, counted from the line of its opening brace to
its closing one. A lambda counts as part of the function that holds it.

The reading is lexical, which is enough for this code base: comments, string and character
literals are blanked, then braces are matched; a brace opens a function body when the text
before it ends a parameter list (or a constructor's initialiser list) and no other function
body is open. Prints each breach and exits 1 if there is one."""
import os
import re
import sys

MOST_LINES = 80
SOURCES = (".cpp", ".h", ".cu", ".cuh")


def blank_literals(text):
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def opens(before, stack):
    """What the brace after `before` opens: a namespace, a class, a function body or a block."""
    if re.search(r"\bnamespace\b[^;{}]*$", before) or re.search(r'extern\s+""\s*$', before):
        return "namespace"
    if re.search(r"\b(struct|class|union|enum)\b[^;{}()]*$", before):
        return "class"
    ends_parameters = re.search(r"\)\s*(const)?\s*(noexcept)?\s*(override)?\s*(->\s*[\w:<>, ]+)?\s*$", before)
    ends_initialisers = re.search(r"\)\s*:\s*[^;{}]*$", before)
    if (ends_parameters or ends_initialisers) and all(kind in ("namespace", "class") for kind, _ in stack):
        return "function"
    return "block"


def long_functions(path):
    lines = blank_literals(open(path, encoding="utf-8", errors="replace").read()).split("\n")
    stack, found = [], []
    for number, line in enumerate(lines):
        for column, char in enumerate(line):
            if char == "{":
                before = " ".join(lines[max(0, number - 3):number]) + " " + line[:column]
                stack.append((opens(before.rstrip(), stack), number))
            elif char == "}" and stack:
                kind, start = stack.pop()
                if kind == "function" and number - start + 1 > MOST_LINES:
                    found.append((start + 1, number - start + 1))
    return found


def main(folders):
    breaches = files = 0
    for folder in folders:
        if not os.path.isdir(folder):
            print(f"function_length_check.py: {folder} is not a folder")
            return 2
        for root, _, names in sorted(os.walk(folder)):
            for name in sorted(names):
                if not name.endswith(SOURCES):
                    continue
                files += 1
                path = os.path.join(root, name)
                for line, length in long_functions(path):
                    print(f"{path}:{line}: a function of {length} lines, more than {MOST_LINES}: split it by step")
                    breaches += 1
    print(f"{files} files checked: {breaches} functions over {MOST_LINES} lines")
    return 1 if breaches else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: function_length_check.py FOLDER...")
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
