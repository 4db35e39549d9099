#!/usr/bin/env python3
"""Point a SAM template's functions at their built bootstraps.

    scripts/package.py TEMPLATE DIR     # make package runs it

DIR holds one directory per function, named after its logical id, with the
linux/arm64 `bootstrap` make's build-<Function> target wrote there. This
writes DIR/template.yaml: TEMPLATE with each AWS::Serverless::Function's
CodeUri set to its directory (relative, as `sam package` reads it), after
checking that every function has its bootstrap and that it is an arm64
(aarch64) ELF executable, the architecture the template deploys. The files
the Serverless Application Repository metadata names (LicenseUrl,
ReadmeUrl: LICENSE, README.md) are copied beside it, and every local path
of DIR/template.yaml must then resolve against DIR (local_paths), as `sam
package --template-file DIR/template.yaml` resolves them before uploading
each one; DIR is what `sam package` and `sam publish` take as it is.
"""
import importlib.util
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The properties `sam package` (and `aws cloudformation package`) upload
# when they hold a local path, resolved against the template's directory:
# aws-cli, awscli/examples/cloudformation/_package_description.rst, and
# the SAM CLI's samcli/lib/package/packageable_resources.py
# (RESOURCES_EXPORT_LIST, METADATA_EXPORT_LIST). A dotted name is a
# nested property.
PACKAGED = {
    "AWS::Serverless::Function": ["CodeUri"],
    "AWS::Serverless::Api": ["DefinitionUri"],
    "AWS::Serverless::HttpApi": ["DefinitionUri"],
    "AWS::Serverless::StateMachine": ["DefinitionUri"],
    "AWS::Serverless::LayerVersion": ["ContentUri"],
    "AWS::Serverless::Application": ["Location"],
    "AWS::Serverless::GraphQLApi": ["SchemaUri"],
    "AWS::Lambda::Function": ["Code"],
    "AWS::Lambda::LayerVersion": ["Content"],
    "AWS::ApiGateway::RestApi": ["BodyS3Location"],
    "AWS::ApiGatewayV2::Api": ["BodyS3Location"],
    "AWS::AppSync::GraphQLSchema": ["DefinitionS3Location"],
    "AWS::AppSync::Resolver": ["RequestMappingTemplateS3Location", "ResponseMappingTemplateS3Location", "CodeS3Location"],
    "AWS::AppSync::FunctionConfiguration": ["RequestMappingTemplateS3Location", "ResponseMappingTemplateS3Location", "CodeS3Location"],
    "AWS::ElasticBeanstalk::ApplicationVersion": ["SourceBundle"],
    "AWS::CloudFormation::Stack": ["TemplateURL"],
    "AWS::Glue::Job": ["Command.ScriptLocation"],
    "AWS::StepFunctions::StateMachine": ["DefinitionS3Location"],
    "AWS::CloudFormation::ModuleVersion": ["ModulePackage"],
    "AWS::CloudFormation::ResourceVersion": ["SchemaHandlerPackage"],
}
SAR_METADATA = ["LicenseUrl", "ReadmeUrl"]
GLOBALS = {"Function": "CodeUri", "Api": "DefinitionUri", "HttpApi": "DefinitionUri", "LayerVersion": "ContentUri"}


def load(path):
    """The template at path, short-form tags in long form (sam-translate.py's loader)."""
    spec = importlib.util.spec_from_file_location("sam_translate", os.path.join(ROOT, "scripts", "sam-translate.py"))
    sam = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sam)
    return sam.load(path)


def is_local(v):
    """A string that is no S3 or web location: a path sam package uploads."""
    return isinstance(v, str) and v != "" and not re.match(r"^(s3|https?)://", v)


def local_paths(tpl):
    """Yields (where, path) for every local path of tpl that `sam package`
    resolves against the template's directory: the packaged properties of
    its resources (PACKAGED), the SAM Globals that give them, and the
    repository metadata's license and readme."""
    meta = (tpl.get("Metadata") or {}).get("AWS::ServerlessRepo::Application") or {}
    for k in SAR_METADATA:
        if is_local(meta.get(k)):
            yield f"Metadata AWS::ServerlessRepo::Application {k}", meta[k]
    for section, prop in GLOBALS.items():
        v = ((tpl.get("Globals") or {}).get(section) or {}).get(prop)
        if is_local(v):
            yield f"Globals {section} {prop}", v
    for name, r in (tpl.get("Resources") or {}).items():
        for prop in PACKAGED.get(r.get("Type"), []):
            v = r.get("Properties") or {}
            for part in prop.split("."):
                v = v.get(part) if isinstance(v, dict) else None
            if is_local(v):
                yield f"{name} {prop}", v


def unresolved(template_path):
    """The local paths of the template at template_path that do not exist
    beside it, each as "where: path"."""
    base = os.path.dirname(os.path.abspath(template_path))
    return [f"{where}: {p}" for where, p in local_paths(load(template_path))
            if not os.path.exists(os.path.join(base, p))]

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
    src_dir = os.path.dirname(os.path.abspath(template))
    meta = (load(template).get("Metadata") or {}).get("AWS::ServerlessRepo::Application") or {}
    copied = []
    for k in SAR_METADATA:
        name = meta.get(k)
        if is_local(name):
            if os.path.isabs(name) or ".." in name.split("/"):
                sys.exit(f"package: {k} {name!r} is not a path inside the template's directory")
            if not os.path.isfile(os.path.join(src_dir, name)):
                sys.exit(f"package: {k} {name!r}: no such file beside {template}")
            os.makedirs(os.path.dirname(os.path.join(out_dir, name)) or out_dir, exist_ok=True)
            shutil.copyfile(os.path.join(src_dir, name), os.path.join(out_dir, name))
            copied.append(name)
    packaged = os.path.join(out_dir, "template.yaml")
    with open(packaged, "w", encoding="utf-8") as f:
        f.writelines(out)
    missing = unresolved(packaged)
    if missing:
        sys.exit(f"package: {packaged}: local paths sam package cannot find beside it: " + "; ".join(missing))
    print(f"package: {len(functions)} functions, arm64: {', '.join(functions)}; {', '.join(copied) or 'no files'} copied -> {packaged}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: package.py TEMPLATE DIR")
    main(sys.argv[1], sys.argv[2])
