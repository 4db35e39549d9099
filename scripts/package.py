#!/usr/bin/env python3
"""Point a SAM template's functions at their built bootstraps.

    scripts/package.py TEMPLATE DIR     # make package runs it

DIR holds one directory per function, named after its logical id, with the
linux/arm64 `bootstrap` make's build-<Function> target wrote there. This
writes DIR/template.yaml: TEMPLATE with each AWS::Serverless::Function's
CodeUri set to its directory (relative, as `sam package` reads it), after
checking that every function has its bootstrap and that it is an arm64
(aarch64) ELF executable, the architecture the template deploys. `sam
package --template-file DIR/template.yaml` then uploads each directory as
the function's code.
"""
import os
import re
import sys

EM_AARCH64 = 183


def is_arm64_elf(path):
    with open(path, "rb") as f:
        head = f.read(20)
    # e_ident: \x7fELF, class 2 (64-bit), data 1 (little-endian); e_machine at 18.
    return len(head) == 20 and head[:4] == b"\x7fELF" and head[4] == 2 and head[5] == 1 \
        and int.from_bytes(head[18:20], "little") == EM_AARCH64


def main(template, out_dir):
    with open(template, encoding="utf-8") as f:
        lines = f.read().splitlines(keepends=True)
    out, functions, current, in_resources = [], [], None, False
    for i, line in enumerate(lines):
        out.append(line)
        if re.match(r"^\S", line):
            in_resources = line.startswith("Resources:")
        m = re.match(r"^  ([A-Za-z0-9]+):\s*$", line)
        if in_resources and m:
            current = m.group(1)
        if in_resources and current and line.rstrip() == "    Type: AWS::Serverless::Function":
            functions.append(current)
        if in_resources and current in functions and line.rstrip() == "    Properties:":
            if any(re.match(r"^      CodeUri:", later) for later in lines[i + 1:i + 40]):
                sys.exit(f"package: {current} sets its own CodeUri in {template}")
            out.append(f"      CodeUri: {current}\n")
            current = None
    if not functions:
        sys.exit(f"package: {template} has no AWS::Serverless::Function")
    problems = []
    for fn in functions:
        boot = os.path.join(out_dir, fn, "bootstrap")
        if not os.path.isfile(boot):
            problems.append(f"{fn}: no {boot}")
        elif not is_arm64_elf(boot):
            problems.append(f"{fn}: {boot} is not a linux/arm64 executable")
    if problems:
        sys.exit("package: " + "; ".join(problems))
    with open(os.path.join(out_dir, "template.yaml"), "w", encoding="utf-8") as f:
        f.writelines(out)
    print(f"package: {len(functions)} functions, arm64: {', '.join(functions)} -> {out_dir}/template.yaml")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: package.py TEMPLATE DIR")
    main(sys.argv[1], sys.argv[2])
