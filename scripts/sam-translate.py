#!/usr/bin/env python3
"""Translate template.yaml into the CloudFormation that `sam deploy` submits.

    scripts/sam-translate.py template.yaml > translated.json

Uses the SAM translator that cfn-lint ships with (Python samtranslator).
CodeUri is pointed at a placeholder s3:// URI, as `sam package` would;
managed policy names resolve to placeholder ARNs (the template's roles
name none, so none is asked for).
"""
import json
import os
import sys

import yaml
from samtranslator.translator.transform import transform


class Loader(yaml.SafeLoader):
    """A YAML loader that maps CloudFormation's short-form tags (!Ref,
    !Sub, ...) to their long forms."""


def _construct(tag):
    name = tag[1:]

    def ctor(loader, node):
        if isinstance(node, yaml.ScalarNode):
            value = loader.construct_scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            value = loader.construct_sequence(node, deep=True)
        else:
            value = loader.construct_mapping(node, deep=True)
        if name == "Ref":
            return {"Ref": value}
        if name == "Condition":
            return {"Condition": value}
        if name == "GetAtt" and isinstance(value, str):
            value = value.split(".", 1)
        return {"Fn::" + name: value}

    return ctor


for _tag in ("!Ref", "!Condition", "!GetAtt", "!Sub", "!If", "!Equals", "!Not", "!And", "!Or",
             "!Join", "!Select", "!Split", "!FindInMap", "!GetAZs", "!ImportValue", "!Base64",
             "!Cidr", "!Contains", "!EachMemberEquals", "!EachMemberIn", "!ValueOf", "!ValueOfAll",
             "!RefAll", "!Length", "!ToJsonString", "!Transform"):
    Loader.add_constructor(_tag, _construct(_tag))


class _Policies:
    def load(self):
        return {}


def load(path):
    """Reads a template, short-form tags in their long form."""
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=Loader)


def translate(tpl):
    """Returns the CloudFormation the SAM template tpl (a dict, changed)
    becomes."""
    # The translator fills in AWS::Region for ARNs it builds; any Region will do.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    glob = tpl.setdefault("Globals", {}).setdefault("Function", {})
    glob["CodeUri"] = "s3://sendonce-artifacts/placeholder.zip"
    for res in tpl.get("Resources", {}).values():
        if res.get("Type") == "AWS::Serverless::Function":
            res.get("Properties", {}).pop("CodeUri", None)
    return transform(tpl, {}, _Policies())


def main(path):
    json.dump(translate(load(path)), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: sam-translate.py TEMPLATE")
    main(sys.argv[1])
