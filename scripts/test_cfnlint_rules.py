#!/usr/bin/env python3
"""Negative tests of sendonce's cfn-lint rules (scripts/cfnlint_rules).

    python3 scripts/test_cfnlint_rules.py        # make test and make lint run it

Each case breaks template.full.yaml in memory, translates it as `sam
deploy` would and expects the rule it names to report it; the real
templates (template.full.yaml, and template.yaml and template.sar.yaml,
made from it with most parameters fixed) must pass every rule. TestLintTemplate runs make's lint step (lint_template in
scripts/steps.sh, cfn-lint itself) on a broken template and expects it to
fail with our rules, so they are wired into make test, and with
cfn-lint's W3037 (an IAM action that does not exist), which only the
translated template's lint reports.
"""
import copy
import importlib.util
import os
import shutil
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

TEMPLATE = sam.load(os.path.join(ROOT, "template.full.yaml"))
VARIANTS = {name: sam.load(os.path.join(ROOT, name)) for name in ("template.yaml", "template.sar.yaml")}
RULES = [r for r in vars(sendonce).values() if isinstance(r, type) and issubclass(r, sendonce.CloudFormationLintRule)
         and r is not sendonce.CloudFormationLintRule]


TRANSLATED = sam.translate(copy.deepcopy(TEMPLATE))
VARIANTS_TRANSLATED = {name: sam.translate(copy.deepcopy(tpl)) for name, tpl in VARIANTS.items()}


def sam_part(tpl):
    """What the SAM translator transforms: all but the resources it copies."""
    return [v for k, v in tpl.items() if k != "Resources"] + \
        [r for r in tpl["Resources"].values() if r.get("Type", "").startswith("AWS::Serverless::")]


def broken(break_it):
    """TEMPLATE broken by break_it, and the CloudFormation that translates
    to: TRANSLATED broken alike when break_it changes only resources SAM
    copies as they are (translating takes a tenth of a second)."""
    tpl = copy.deepcopy(TEMPLATE)
    break_it(tpl)
    if sam_part(tpl) != sam_part(TEMPLATE):
        return tpl, sam.translate(copy.deepcopy(tpl))
    out = copy.deepcopy(TRANSLATED)
    break_it(out)
    return tpl, out


def findings(rule, tpl, translated):
    """The messages of rule on translated, the CloudFormation SAM template
    tpl translates to (and on tpl, for what the transform drops)."""
    return list(rule.check(types.SimpleNamespace(template=translated, sam=tpl)))


def res(tpl, name):
    return tpl["Resources"][name]["Properties"]


def glob(tpl):
    return tpl["Globals"]["Function"]


def statements(tpl, role):
    return res(tpl, role)["Policies"][0]["PolicyDocument"]["Statement"]


def sid(tpl, role, name):
    """The role's statement with that Sid, at the top or in a branch of an
    Fn::If."""
    def walk(sts):
        for s in sts:
            if isinstance(s, dict) and "Fn::If" in s:
                yield from walk(s["Fn::If"][1:])
            elif isinstance(s, dict):
                yield s
    return next(s for s in walk(statements(tpl, role)) if s.get("Sid") == name)


def env(tpl, fn):
    return res(tpl, fn)["Environment"]["Variables"]


def redact_branch(tpl, role, n):
    """Branch n (1: the generated secret, 2: the SSM parameter) of the role's
    statement that reads the address-token key."""
    st = next(s for s in statements(tpl, role) if isinstance(s, dict) and "Fn::If" in s
              and s["Fn::If"][0] == "CreateRedactKey" and isinstance(s["Fn::If"][1], dict))
    return st["Fn::If"][n]


def add(role, st):
    return lambda tpl: statements(tpl, role).append(st)


def leading_keys(tpl, role, name, keys):
    sid(tpl, role, name)["Condition"]["ForAllValues:StringLike"]["dynamodb:LeadingKeys"] = keys


def condition_any_value(tpl):
    c = sid(tpl, "ApiRole", "RateWindows")["Condition"]
    c["ForAnyValue:StringLike"] = c.pop("ForAllValues:StringLike")


def queue(tpl):
    return res(tpl, "NotificationQueue")


def event(tpl):
    return res(tpl, "SenderFunction")["Events"]["Notifications"]["Properties"]


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
        "NoAlias": lambda t: [glob(t).pop("AutoPublishAlias"), glob(t).pop("DeploymentPreference")] +
        [r["Properties"].pop("DeploymentPreference", None) for r in t["Resources"].values()
         if r["Type"] == "AWS::Serverless::Function"],
        "ApiIgnoresErrors": lambda t: res(t, "ApiFunction").pop("DeploymentPreference"),
        "SenderIgnoresErrors": lambda t: res(t, "SenderFunction").pop("DeploymentPreference"),
        "NoFencingRollback": lambda t: glob(t)["DeploymentPreference"].update(Alarms=[{"Ref": "UncertainAttemptsAlarm"}]),
        "AllAtOnceOnly": lambda t: glob(t)["DeploymentPreference"].update(Type="AllAtOnce"),
    },
    sendonce.RedactKeySecret: {
        "ShortKey": lambda t: res(t, "RedactKeySecret")["GenerateSecretString"].update(PasswordLength=32),
        "FixedKey": lambda t: res(t, "RedactKeySecret").update(SecretString="k"),
        "FunctionWithoutKey": lambda t: env(t, "ApiFunction").pop("SENDONCE_REDACT_KEY_PARAM"),
        "GeneratedKeyOnly": lambda t: env(t, "SenderFunction").update(SENDONCE_REDACT_KEY_PARAM={"Ref": "RedactKeySecret"}),
        "EverySecret": lambda t: redact_branch(t, "WebhookRole", 1).update(Resource="*"),
        "EveryParameter": lambda t: redact_branch(t, "SesEventsRole", 2).update(
            Resource={"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/*"}),
        "SecondSecret": add("SenderRole", {"Effect": "Allow", "Action": "secretsmanager:GetSecretValue",
                                           "Resource": "arn:aws:secretsmanager:us-east-1:1:secret:x"}),
        "ListSecrets": lambda t: redact_branch(t, "ReconcilerRole", 1).update(
            Action=["secretsmanager:GetSecretValue", "secretsmanager:ListSecrets"]),
    },
    sendonce.OneLedgerTable: {
        "OtherTableName": lambda t: env(t, "ApiFunction").update(SENDONCE_TABLE="other"),
        "TwoTablesOneMode": lambda t: t["Conditions"].update(CreateGlobalTable={"Fn::Equals": [{"Ref": "LedgerMode"}, "single-region"]}),
        "TableInExistingMode": lambda t: t["Conditions"].update(CreateSingleTable={"Fn::Equals": [{"Ref": "LedgerMode"}, "existing"]}),
    },
    sendonce.TimingParameters: {
        "VisibilityUnbound": lambda t: queue(t).update(VisibilityTimeout=30),
        "QueueRetentionUnbound": lambda t: queue(t).pop("MessageRetentionPeriod"),
        "DLQRetentionLiteral": lambda t: res(t, "NotificationDLQ").update(MessageRetentionPeriod=60),
        "ReceiveCountLiteral": lambda t: queue(t)["RedrivePolicy"].update(maxReceiveCount=1),
        "SenderTimeoutLiteral": lambda t: res(t, "SenderFunction").update(Timeout=900),
        "BatchingWindowLiteral": lambda t: event(t).update(MaximumBatchingWindowInSeconds=300),
        "SecondQueuePoller": lambda t: res(t, "ReconcilerFunction")["Events"].update(
            Poll={"Type": "SQS", "Properties": {"Queue": {"Fn::GetAtt": ["NotificationDLQ", "Arn"]},
                                                "FunctionResponseTypes": ["ReportBatchItemFailures"]}}),
        "ReconcilerClaimLiteral": lambda t: env(t, "ReconcilerFunction").update(SENDONCE_CLAIM_TIMEOUT="10s"),
        "SenderProviderLiteral": lambda t: env(t, "SenderFunction").update(SENDONCE_PROVIDER_TIMEOUT="30s"),
        "SenderWithoutRetention": lambda t: env(t, "SenderFunction").pop("SENDONCE_RETENTION"),
        "WebhookRetentionLiteral": lambda t: env(t, "WebhookFunction").update(SENDONCE_RETENTION="1h"),
        "LongMaxAge": lambda t: env(t, "ReconcilerFunction").update(SENDONCE_MAX_AGE="720h"),
        "FixedParameterStillReferenced": lambda t: [t["Parameters"].pop("ClaimTimeoutSeconds"),
                                                    env(t, "SenderFunction").update(SENDONCE_CLAIM_TIMEOUT={"Ref": "LedgerMode"})],
    },
    sendonce.FunctionGrants: {
        "ReconcilerPutItem": lambda t: sid(t, "ReconcileWorkerRole", "Ledger")["Action"].append("dynamodb:PutItem"),
        "ApiDeletesLedgerRows": add("ApiRole", {
            "Effect": "Allow", "Action": ["dynamodb:DeleteItem"], "Resource": "arn:aws:dynamodb:us-east-1:1:table/t",
            "Condition": {"ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["v1_*"]}}}),
        "WebhookEveryPrefix": lambda t: leading_keys(t, "WebhookRole", "Callbacks", ["*"]),
        "SenderWritesApiKeys": lambda t: leading_keys(t, "SenderRole", "Ledger", ["v1_*", "apikey#*"]),
        "ReconcilerLacksTemplates": lambda t: leading_keys(t, "ReconcileWorkerRole", "Templates", ["v1_*"]),
        # The grant the render path lacked (issue 32): a pinned version is a GetItem on tpl#...#v<N>.
        "SenderCannotGetTemplateVersion": lambda t: sid(t, "SenderRole", "Templates").update(Action="dynamodb:BatchGetItem"),
        "WorkerCannotGetTemplateVersion": lambda t: sid(t, "ReconcileWorkerRole", "Templates").update(Action=["dynamodb:BatchGetItem"]),
        "SenderReadsLedgerRows": lambda t: sid(t, "SenderRole", "Ledger")["Action"].append("dynamodb:GetItem"),
        "NoLeadingKeysCondition": lambda t: sid(t, "SesEventsRole", "Ledger").pop("Condition"),
        "ForAnyValue": condition_any_value,
        "ApiLacksIdempotency": lambda t: sid(t, "ApiRole", "Idempotency").update(Action=["dynamodb:PutItem"]),
        "UnusedBatchAction": lambda t: sid(t, "SenderRole", "PollQueue")["Action"].append("sqs:DeleteMessageBatch"),
        "ExtraActionInIfBranch": add("WebhookRole", {"Fn::If": ["Tracing", {
            "Effect": "Allow", "Action": "sns:Publish", "Resource": "arn:aws:sns:us-east-1:1:t"}, {"Ref": "AWS::NoValue"}]}),
        "AttachedPolicy": lambda t: t["Resources"].update(ExtraPolicy={"Type": "AWS::IAM::Policy", "Properties": {
            "PolicyName": "x", "Roles": [{"Ref": "SenderRole"}], "PolicyDocument": {"Statement": [
                {"Effect": "Allow", "Action": "sqs:PurgeQueue", "Resource": {"Fn::GetAtt": ["NotificationQueue", "Arn"]}}]}}}),
        "UnknownFunction": lambda t: t["Resources"].update(ExtraFunction={
            "Type": "AWS::Serverless::Function", "Properties": {"Role": {"Fn::GetAtt": ["CodeDeployRole", "Arn"]}}}),
        "SharedRole": lambda t: res(t, "WebhookFunction").update(Role={"Fn::GetAtt": ["ApiRole", "Arn"]}),
        "SAMGeneratedRole": lambda t: res(t, "ReconcilerFunction").pop("Role"),
        "PoliciesBesideRole": lambda t: res(t, "ApiFunction").update(Policies=["AWSLambdaBasicExecutionRole"]),
        "WebhookInvokesFunction": add("WebhookRole", {
            "Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": {"Ref": "SmsLambdaArn"}}),
    },
    sendonce.LambdaProviders: {
        "EveryFunction": lambda t: sid(t, "SenderRole", "InvokeSmsProvider").update(Resource="*"),
        "FunctionPrefix": lambda t: sid(t, "ReconcileWorkerRole", "InvokePushProvider").update(
            Resource={"Fn::Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}:function:*"}),
        "Unconditional": lambda t: statements(t, "SenderRole").append(sid(t, "SenderRole", "InvokeEmailProvider")),
        "WrongChannelCondition": lambda t: sid(t, "ReconcileWorkerRole", "InvokeSmsProvider").update(Resource={"Ref": "EmailLambdaArn"}),
        "ChannelMissing": lambda t: sid(t, "SenderRole", "InvokePushProvider").update(Action="sns:GetTopicAttributes"),
        "WebhookInvokes": add("WebhookRole", {"Fn::If": ["SmsInvokesFunction", {
            "Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": {"Ref": "SmsLambdaArn"}}, {"Ref": "AWS::NoValue"}]}),
        "ServiceWildcard": add("ApiRole", {"Effect": "Allow", "Action": "lambda:*", "Resource": {"Ref": "SmsLambdaArn"}}),
        "NotResource": lambda t: sid(t, "SenderRole", "InvokeSmsProvider").update(NotResource={"Ref": "SmsLambdaArn"}),
    },
    sendonce.AlarmDestination: {
        "NoRule": lambda t: t["Rules"].pop("AlarmDestination"),
        "EmailOnly": lambda t: t["Rules"]["AlarmDestination"]["Assertions"][0].update(
            Assert={"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmEmail"}, ""]}]}),
        "TopicRequired": lambda t: t["Rules"]["AlarmDestination"]["Assertions"][0].update(
            Assert={"Fn::Not": [{"Fn::Equals": [{"Ref": "AlarmTopicArn"}, ""]}]}),
        "NoTopicParameter": lambda t: t["Parameters"].pop("AlarmTopicArn"),
    },
}


class TestRules(unittest.TestCase):
    def test_template_passes(self):
        for rule in RULES:
            with self.subTest(rule=rule.id, template="template.full.yaml"):
                self.assertEqual(findings(rule, TEMPLATE, TRANSLATED), [])
            for name, tpl in VARIANTS.items():
                with self.subTest(rule=rule.id, template=name):
                    self.assertEqual(findings(rule, tpl, VARIANTS_TRANSLATED[name]), [])

    def test_breakage_reported(self):
        self.assertEqual(sorted(r.id for r in BREAKAGES), sorted(r.id for r in RULES))
        for rule, cases in BREAKAGES.items():
            for name, break_it in cases.items():
                with self.subTest(rule=rule.id, case=name):
                    self.assertNotEqual(findings(rule, *broken(break_it)), [], f"{rule.id} misses {name}")


# A small SAM template (linting it takes a few seconds, the whole one four
# times as long) that lint_template must reject: our rules on the SAM
# template (E9101; E9111 reading the file itself for the Policies the
# transform drops), cfn-lint's W3037 (an IAM action that does not exist) on
# the translated one only.
BROKEN = """\
AWSTemplateFormatVersion: "2010-09-09"
Transform: AWS::Serverless-2016-10-31
Resources:
  Queue:
    Type: AWS::SQS::Queue
  Role:
    Type: AWS::IAM::Role
    Properties:
      AssumeRolePolicyDocument:
        Statement: [{Effect: Allow, Principal: {Service: lambda.amazonaws.com}, Action: sts:AssumeRole}]
      Policies:
        - PolicyName: p
          PolicyDocument:
            Statement: [{Effect: Allow, Action: [sqs:DeleteMessageBatch], Resource: !GetAtt Queue.Arn}]
  SenderFunction:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: s3://b/k.zip
      Runtime: provided.al2023
      Handler: bootstrap
      Role: !GetAtt Role.Arn
      Policies: [AWSLambdaBasicExecutionRole]
      Events:
        Q: {Type: SQS, Properties: {Queue: !GetAtt Queue.Arn}}
"""
LINT_FINDINGS = ["E9101 SenderFunctionQ: FunctionResponseTypes lacks ReportBatchItemFailures",
                 "W3037 'deletemessagebatch' is not one of",
                 "E9111 SenderFunction: SAM ignores Policies beside an explicit Role"]


class TestLintTemplate(unittest.TestCase):
    def test_sam_copies_plain_resources(self):
        """broken() relies on it."""
        for name, r in TEMPLATE["Resources"].items():
            if not r["Type"].startswith("AWS::Serverless::"):
                self.assertEqual(TRANSLATED["Resources"].get(name), r, name)

    def test_broken_template_fails(self):
        os.makedirs(os.path.join(ROOT, ".build"), exist_ok=True)
        path = os.path.join(ROOT, ".build", "broken-template.yaml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(BROKEN)
        run = subprocess.run(["bash", "-c", 'source scripts/steps.sh && lint_template "$0"', path],
                             cwd=ROOT, capture_output=True, text=True)
        self.assertNotEqual(run.returncode, 0, run.stdout + run.stderr)
        for want in LINT_FINDINGS:
            self.assertIn(want, run.stdout, run.stdout + run.stderr)


_pspec = importlib.util.spec_from_file_location("package", os.path.join(ROOT, "scripts", "package.py"))
package = importlib.util.module_from_spec(_pspec)
_pspec.loader.exec_module(package)


def sar_list():
    """The types on the Serverless Application Repository's list, as
    infra/testdata/sar-supported-resources.txt keeps it (with its source)."""
    with open(os.path.join(ROOT, "infra", "testdata", "sar-supported-resources.txt"), encoding="utf-8") as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


class TestPackage(unittest.TestCase):
    """scripts/package.py (make package) points the functions at their
    bootstraps and refuses a missing or non-arm64 one; its directory is what
    sam package and sam publish take as it is: every local path resolves
    beside the template, and every resource type is on the repository's
    list."""

    def run_package(self, machine, template="template.sar.yaml", check=None):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            for fn in ("SenderFunction", "ReconcilerFunction", "ReconcileWorkerFunction", "WebhookFunction", "ApiFunction", "SesEventsFunction"):
                os.makedirs(os.path.join(d, fn))
                with open(os.path.join(d, fn, "bootstrap"), "wb") as f:
                    # an ELF header: 64-bit, little-endian, e_machine at byte 18
                    f.write(b"\x7fELF\x02\x01" + bytes(12) + machine.to_bytes(2, "little") + bytes(40))
            run = subprocess.run([sys.executable, "scripts/package.py", template, d],
                                 cwd=ROOT, capture_output=True, text=True)
            out = ""
            if run.returncode == 0:
                with open(os.path.join(d, "template.yaml"), encoding="utf-8") as f:
                    out = f.read()
                if check:
                    check(d)
            return run, out

    def test_arm64(self):
        run, out = self.run_package(183)
        self.assertEqual(run.returncode, 0, run.stderr)
        packaged = sam.yaml.load(out, Loader=sam.Loader)
        for name, r in packaged["Resources"].items():
            if r["Type"] == "AWS::Serverless::Function":
                self.assertEqual(r["Properties"]["CodeUri"], name)

    def test_paths_resolve(self):
        def check(d):
            packaged = os.path.join(d, "template.yaml")
            self.assertEqual(package.unresolved(packaged), [])
            got = dict(package.local_paths(package.load(packaged)))
            for where in ("Metadata AWS::ServerlessRepo::Application LicenseUrl",
                          "Metadata AWS::ServerlessRepo::Application ReadmeUrl", "SenderFunction CodeUri"):
                self.assertIn(where, got)
            for name in ("LICENSE", "README.md"):
                with open(os.path.join(d, name), "rb") as a, open(os.path.join(ROOT, name), "rb") as b:
                    self.assertEqual(a.read(), b.read(), name)
            os.remove(os.path.join(d, "LICENSE"))
            self.assertEqual(package.unresolved(packaged),
                             ["Metadata AWS::ServerlessRepo::Application LicenseUrl: LICENSE"])
        run, _ = self.run_package(183, check=check)
        self.assertEqual(run.returncode, 0, run.stderr)

    def test_missing_path_refused(self):
        """A template naming a file that is not beside it: package.py stops
        and names it."""
        import tempfile
        with tempfile.TemporaryDirectory() as src:
            shutil.copyfile(os.path.join(ROOT, "template.sar.yaml"), os.path.join(src, "template.sar.yaml"))
            shutil.copyfile(os.path.join(ROOT, "LICENSE"), os.path.join(src, "LICENSE"))
            run, _ = self.run_package(183, template=os.path.join(src, "template.sar.yaml"))
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("ReadmeUrl 'README.md'", run.stderr)
        self.assertNotIn("Traceback", run.stderr)

    def test_supported_types(self):
        """Every type the packaged template declares, and the CloudFormation
        it translates to, is on the repository's list."""
        run, out = self.run_package(183)
        self.assertEqual(run.returncode, 0, run.stderr)
        packaged = sam.yaml.load(out, Loader=sam.Loader)
        supported = sar_list()
        types = {r["Type"] for r in packaged["Resources"].values()} | \
            {r["Type"] for r in sam.translate(copy.deepcopy(packaged))["Resources"].values()}
        self.assertEqual(sorted(types - supported), [])
        self.assertGreater(len(types), 10)

    def test_x86_refused(self):
        run, _ = self.run_package(62)  # EM_X86_64
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("not a linux/arm64 executable", run.stderr)


if __name__ == "__main__":
    unittest.main()
