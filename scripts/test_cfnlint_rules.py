#!/usr/bin/env python3
"""Negative tests of sendonce's cfn-lint rules (scripts/cfnlint_rules).

    python3 scripts/test_cfnlint_rules.py        # make test and make lint run it

Each case breaks template.yaml in memory, translates it as `sam deploy`
would and expects the rule it names to report it; the real template must
pass every rule. TestLintTemplate runs make's lint step (lint_template in
scripts/steps.sh, cfn-lint itself) on a broken copy of the file and
expects it to fail, so the rules are wired into make test.
"""
import copy
import importlib.util
import os
import subprocess
import sys
import types
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts", "cfnlint_rules"))
import sendonce  # noqa: E402

_spec = importlib.util.spec_from_file_location("sam_translate", os.path.join(ROOT, "scripts", "sam-translate.py"))
sam = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sam)

TEMPLATE = sam.load(os.path.join(ROOT, "template.yaml"))
RULES = [sendonce.PartialBatchResponse, sendonce.FunctionPlatform, sendonce.NoWildcardPolicies,
         sendonce.SnsPublishScoped, sendonce.PermissionsBoundary, sendonce.ParametersDocumented,
         sendonce.GradualDeployment, sendonce.RedactKeySecret, sendonce.OneLedgerTable]


def findings(rule, tpl):
    """The messages of rule on the CloudFormation tpl translates to."""
    return list(rule().check(types.SimpleNamespace(template=sam.translate(copy.deepcopy(tpl)))))


def res(tpl, name):
    return tpl["Resources"][name]["Properties"]


def glob(tpl):
    return tpl["Globals"]["Function"]


def statements(tpl, role):
    return res(tpl, role)["Policies"][0]["PolicyDocument"]["Statement"]


def sid(tpl, role, name):
    return next(s for s in statements(tpl, role) if isinstance(s, dict) and s.get("Sid") == name)


def env(tpl, fn):
    return res(tpl, fn)["Environment"]["Variables"]


def add(role, st):
    return lambda tpl: statements(tpl, role).append(st)


BREAKAGES = {
    sendonce.PartialBatchResponse: {
        "NoResponseTypes": lambda t: res(t, "SenderFunction")["Events"]["Notifications"]["Properties"].pop("FunctionResponseTypes"),
    },
    sendonce.FunctionPlatform: {
        "X86Function": lambda t: res(t, "ApiFunction").update(Architectures=["x86_64"]),
        "GlobalRuntime": lambda t: glob(t).update(Runtime="provided.al2"),
        "Handler": lambda t: glob(t).update(Handler="main"),
        "NoBuildMethod": lambda t: t["Resources"]["SenderFunction"].pop("Metadata"),
        "TextLogs": lambda t: res(t, "WebhookFunction")["LoggingConfig"].update(LogFormat="Text"),
    },
    sendonce.NoWildcardPolicies: {
        "ActionStar": add("SenderRole", {"Effect": "Allow", "Action": "*", "Resource": "arn:aws:sqs:us-east-1:1:q"}),
        "ServiceStar": add("SenderRole", {"Effect": "Allow", "Action": ["dynamodb:*"], "Resource": "arn:aws:dynamodb:us-east-1:1:table/t"}),
        "DynamoOnEveryTable": add("ApiRole", {"Effect": "Allow", "Action": ["dynamodb:GetItem"], "Resource": "*"}),
        "InsideIfBranch": add("ReconcilerRole", {"Fn::If": ["Tracing", {"Ref": "AWS::NoValue"},
                                                            {"Effect": "Allow", "Action": "dynamodb:Query", "Resource": ["*"]}]}),
        "NotAction": add("WebhookRole", {"Effect": "Allow", "NotAction": "iam:*", "Resource": "*"}),
        "ProducerPolicy": lambda t: res(t, "ProducerPolicy")["PolicyDocument"]["Statement"][0].update(Action="sqs:*"),
    },
    sendonce.SnsPublishScoped: {
        "PublishEverywhere": add("ReconcilerRole", {"Effect": "Allow", "Action": "sns:Publish", "Resource": "*"}),
        "NotResourceTooNarrow": add("SenderRole", {"Effect": "Allow", "Action": "sns:Publish",
                                                   "NotResource": {"Fn::Sub": "arn:${AWS::Partition}:sns:*:*:endpoint/*"}}),
    },
    sendonce.PermissionsBoundary: {
        "RoleWithoutBoundary": lambda t: res(t, "CodeDeployRole").pop("PermissionsBoundary"),
        "AlwaysNone": lambda t: res(t, "ApiRole").update(PermissionsBoundary={"Ref": "AWS::NoValue"}),
    },
    sendonce.ParametersDocumented: {
        "NoDescription": lambda t: t["Parameters"]["SmtpHost"].pop("Description"),
        "FreeString": lambda t: t["Parameters"]["SesFrom"].pop("AllowedPattern"),
        "Ungrouped": lambda t: t["Parameters"].update(NewSetting={"Type": "Number", "Description": "x", "Default": 1}),
        "Unlabelled": lambda t: t["Metadata"]["AWS::CloudFormation::Interface"]["ParameterLabels"].pop("ClaimTimeoutSeconds"),
        "TwoGroups": lambda t: t["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"][0]["Parameters"].append("BatchSize"),
        "GroupListsNothing": lambda t: t["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"][0]["Parameters"].append("Gone"),
    },
    sendonce.GradualDeployment: {
        "NoAlias": lambda t: [glob(t).pop("AutoPublishAlias"), glob(t).pop("DeploymentPreference"),
                              res(t, "SenderFunction").pop("DeploymentPreference")],
        "SenderIgnoresErrors": lambda t: res(t, "SenderFunction").pop("DeploymentPreference"),
        "NoFencingRollback": lambda t: glob(t)["DeploymentPreference"].update(Alarms=[{"Ref": "UncertainAttemptsAlarm"}]),
        "AllAtOnceOnly": lambda t: glob(t)["DeploymentPreference"].update(Type="AllAtOnce"),
    },
    sendonce.RedactKeySecret: {
        "ShortKey": lambda t: res(t, "RedactKeySecret")["GenerateSecretString"].update(PasswordLength=32),
        "FixedKey": lambda t: res(t, "RedactKeySecret").update(SecretString="k"),
        "FunctionWithoutKey": lambda t: env(t, "ApiFunction").pop("SENDONCE_REDACT_KEY_PARAM"),
        "EverySecret": lambda t: sid(t, "WebhookRole", "RedactKey").update(Resource="*"),
        "SecondSecret": add("SenderRole", {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                                           "Resource": "arn:aws:secretsmanager:us-east-1:1:secret:x"}),
        "ListSecrets": lambda t: sid(t, "ReconcilerRole", "RedactKey").update(
            Action=["secretsmanager:GetSecretValue", "secretsmanager:ListSecrets"]),
    },
    sendonce.OneLedgerTable: {
        "OtherTableName": lambda t: env(t, "ApiFunction").update(SENDONCE_TABLE="other"),
        "TwoTablesOneMode": lambda t: t["Conditions"].update(CreateGlobalTable={"Fn::Equals": [{"Ref": "LedgerMode"}, "single-region"]}),
        "TableInExistingMode": lambda t: t["Conditions"].update(CreateSingleTable={"Fn::Equals": [{"Ref": "LedgerMode"}, "existing"]}),
    },
}


class TestRules(unittest.TestCase):
    def test_template_passes(self):
        for rule in RULES:
            with self.subTest(rule=rule.id):
                self.assertEqual(findings(rule, TEMPLATE), [])

    def test_breakage_reported(self):
        self.assertEqual(sorted(r.id for r in BREAKAGES), sorted(r.id for r in RULES))
        for rule, cases in BREAKAGES.items():
            for name, break_it in cases.items():
                with self.subTest(rule=rule.id, case=name):
                    tpl = copy.deepcopy(TEMPLATE)
                    break_it(tpl)
                    self.assertNotEqual(findings(rule, tpl), [], f"{rule.id} misses {name}")


class TestLintTemplate(unittest.TestCase):
    def test_broken_copy_fails(self):
        with open(os.path.join(ROOT, "template.yaml"), encoding="utf-8") as f:
            text = f.read()
        line = "            FunctionResponseTypes: [ReportBatchItemFailures]\n"
        self.assertIn(line, text)
        os.makedirs(os.path.join(ROOT, ".build"), exist_ok=True)
        broken = os.path.join(ROOT, ".build", "broken-template.yaml")
        with open(broken, "w", encoding="utf-8") as f:
            f.write(text.replace(line, ""))
        run = subprocess.run(["bash", "-c", 'source scripts/steps.sh && lint_template "$0"', broken],
                             cwd=ROOT, capture_output=True, text=True)
        self.assertNotEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("E9101", run.stdout, run.stdout + run.stderr)


if __name__ == "__main__":
    unittest.main()
