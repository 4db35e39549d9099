"""sendonce's cfn-lint rules: properties of template.yaml that no built-in
rule checks. cfn-lint applies them to the template after the SAM
transform, so they read the CloudFormation that `sam deploy` submits.

    cfn-lint --append-rules scripts/cfnlint_rules template.yaml   # make lint

The arithmetic between parameters, the table schema and each function's
IAM grants are checked by the Go tests in infra/; the negative tests of
these rules are in scripts/test_cfnlint_rules.py.
"""
from cfnlint.rules import CloudFormationLintRule, RuleMatch

ROLLBACK_ALARMS = ["FencingLostAlarm", "UncertainAttemptsAlarm"]
SENDER_ALARMS = {"SenderFunction": ["SenderErrorsAlarm"]}
REDACT_KEY = {"Ref": "RedactKeySecret"}


def resources(cfn, *types):
    """Yields (name, resource, properties) of the resources of the types."""
    for name, res in (cfn.template.get("Resources") or {}).items():
        if isinstance(res, dict) and res.get("Type") in types:
            yield name, res, res.get("Properties") or {}


def branches(v):
    """Yields v, or the values of both branches of every Fn::If in it."""
    if isinstance(v, dict) and len(v) == 1 and "Fn::If" in v and len(v["Fn::If"]) == 3:
        yield from branches(v["Fn::If"][1])
        yield from branches(v["Fn::If"][2])
    elif isinstance(v, list):
        for e in v:
            yield from branches(e)
    else:
        yield v


def strings(v):
    """The literal strings in v (a string or a list), through Fn::If."""
    return [s for s in branches(v) if isinstance(s, str)]


def statements(cfn):
    """Yields (path, statement) of every Allow statement of the template's
    IAM roles and policies, from both branches of every Fn::If."""
    for name, res, props in resources(cfn, "AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        docs = [p.get("PolicyDocument", {}) for p in props.get("Policies", [])] if res["Type"] == "AWS::IAM::Role" else [props.get("PolicyDocument", {})]
        for doc in docs:
            for st in branches(doc.get("Statement", [])):
                if isinstance(st, dict) and st.get("Effect") == "Allow":
                    yield ["Resources", name], st


def get_att(v, attr="Arn"):
    """The resource named by {"Fn::GetAtt": [name, attr]}, or None."""
    args = v.get("Fn::GetAtt") if isinstance(v, dict) else None
    return args[0] if isinstance(args, list) and len(args) == 2 and args[1] == attr else None


class _Check:
    """match() as RuleMatches of check()'s (path, message) pairs."""

    source_url = "https://github.com/sendonce/sendonce/blob/main/scripts/cfnlint_rules/sendonce.py"
    tags = ["sendonce"]

    def match(self, cfn):
        return [RuleMatch(path, msg) for path, msg in self.check(cfn)]


class PartialBatchResponse(_Check, CloudFormationLintRule):
    id = "E9101"
    shortdesc = "SQS event sources report batch item failures"
    description = "Without ReportBatchItemFailures one failed record makes the whole batch redeliver."

    def check(self, cfn):
        for name, _, props in resources(cfn, "AWS::Lambda::EventSourceMapping"):
            queue = get_att(props.get("EventSourceArn"))
            if queue and cfn.template["Resources"].get(queue, {}).get("Type") == "AWS::SQS::Queue":
                if "ReportBatchItemFailures" not in strings(props.get("FunctionResponseTypes")):
                    yield ["Resources", name, "Properties"], f"{name}: FunctionResponseTypes lacks ReportBatchItemFailures"


class FunctionPlatform(_Check, CloudFormationLintRule):
    id = "E9102"
    shortdesc = "Functions are Go bootstraps on arm64 provided.al2023 with JSON logs"
    description = "Every function is built by make (BuildMethod makefile) for the platform it runs on."

    def check(self, cfn):
        for name, res, props in resources(cfn, "AWS::Lambda::Function"):
            got = {
                "Runtime": props.get("Runtime"),
                "Architectures": props.get("Architectures"),
                "Handler": props.get("Handler"),
                "Metadata.BuildMethod": (res.get("Metadata") or {}).get("BuildMethod"),
                "LoggingConfig.LogFormat": (props.get("LoggingConfig") or {}).get("LogFormat"),
            }
            want = {"Runtime": "provided.al2023", "Architectures": ["arm64"], "Handler": "bootstrap",
                    "Metadata.BuildMethod": "makefile", "LoggingConfig.LogFormat": "JSON"}
            for k, v in want.items():
                if got[k] != v:
                    yield ["Resources", name], f"{name}: {k} is {got[k]!r}, want {v!r}"


class NoWildcardPolicies(_Check, CloudFormationLintRule):
    id = "E9103"
    shortdesc = "No policy grants every action, or DynamoDB on every table"
    description = "Action '*', 'service:*' and NotAction grant more than the code calls; DynamoDB actions name the table."

    def check(self, cfn):
        for path, st in statements(cfn):
            actions = strings(st.get("Action"))
            if "NotAction" in st:
                yield path, f"{path[1]}: NotAction grants everything else"
            for a in actions:
                if a == "*" or a.endswith(":*"):
                    yield path, f"{path[1]}: Action {a!r}"
            dynamo = [a for a in actions if a.lower().startswith("dynamodb:")]
            if dynamo and "*" in strings(st.get("Resource")):
                yield path, f"{path[1]}: DynamoDB actions {dynamo} on Resource '*'"


class SnsPublishScoped(_Check, CloudFormationLintRule):
    id = "E9104"
    shortdesc = "sns:Publish never reaches every topic and endpoint"
    description = ("SMS (a phone number has no ARN) is authorised against '*', so its grant excludes every SNS ARN "
                   "with NotResource; other grants name their resources.")

    def check(self, cfn):
        for path, st in statements(cfn):
            if "sns:Publish" not in strings(st.get("Action")):
                continue
            if "*" in strings(st.get("Resource")):
                yield path, f"{path[1]}: sns:Publish on Resource '*' reaches every topic and endpoint"
            elif "NotResource" in st and st["NotResource"] != {"Fn::Sub": "arn:${AWS::Partition}:sns:*:*:*"}:
                yield path, f"{path[1]}: sns:Publish NotResource {st['NotResource']} does not exclude every SNS ARN"
            elif "NotResource" not in st and "Resource" not in st:
                yield path, f"{path[1]}: sns:Publish without Resource"


class PermissionsBoundary(_Check, CloudFormationLintRule):
    id = "E9105"
    shortdesc = "Every role takes the PermissionsBoundary parameter"
    description = "An organisation's permissions boundary applies to every role the stack creates."
    want = {"Fn::If": ["HasPermissionsBoundary", {"Ref": "PermissionsBoundary"}, {"Ref": "AWS::NoValue"}]}

    def check(self, cfn):
        for name, _, props in resources(cfn, "AWS::IAM::Role"):
            if props.get("PermissionsBoundary") != self.want:
                yield ["Resources", name], f"{name}: PermissionsBoundary is {props.get('PermissionsBoundary')}, want {self.want}"


class ParametersDocumented(_Check, CloudFormationLintRule):
    id = "E9106"
    shortdesc = "Every parameter is described, constrained, grouped and labelled"
    description = ("`sam deploy --guided` and the console ask for every parameter: each says what it is, a String "
                   "takes AllowedPattern or AllowedValues, and it sits in one ParameterGroups entry with a label.")

    def check(self, cfn):
        iface = (cfn.template.get("Metadata") or {}).get("AWS::CloudFormation::Interface") or {}
        params = cfn.template.get("Parameters") or {}
        group = {}
        for g in iface.get("ParameterGroups") or []:
            label = (g.get("Label") or {}).get("default")
            for p in g.get("Parameters") or []:
                if p in group:
                    yield ["Metadata"], f"parameter {p} is in groups {group[p]!r} and {label!r}"
                if p not in params:
                    yield ["Metadata"], f"group {label!r} lists {p}, which is not a parameter"
                group[p] = label
        labels = iface.get("ParameterLabels") or {}
        for name, p in params.items():
            path = ["Parameters", name]
            if not str(p.get("Description", "")).strip():
                yield path, f"parameter {name} has no Description"
            if p.get("Type") == "String" and "AllowedPattern" not in p and "AllowedValues" not in p:
                yield path, f"string parameter {name} has neither AllowedPattern nor AllowedValues"
            if name not in group:
                yield path, f"parameter {name} is in no ParameterGroups entry"
            if not (labels.get(name) or {}).get("default"):
                yield path, f"parameter {name} has no ParameterLabels entry"


class GradualDeployment(_Check, CloudFormationLintRule):
    id = "E9107"
    shortdesc = "Every function shifts traffic through CodeDeploy and rolls back on the alarms"
    description = ("Each function publishes an alias updated by a CodeDeploy deployment group that offers a canary "
                   "and rolls back when FencingLost, UncertainAttempts (and, for the sender, its errors) alarm.")

    def check(self, cfn):
        res = cfn.template.get("Resources") or {}
        aliases = {}
        for _, alias, props in resources(cfn, "AWS::Lambda::Alias"):
            fn = props.get("FunctionName")
            if isinstance(fn, dict) and "Ref" in fn:
                aliases[fn["Ref"]] = alias
        for name, _, _ in resources(cfn, "AWS::Lambda::Function"):
            path = ["Resources", name]
            update = ((aliases.get(name) or {}).get("UpdatePolicy") or {}).get("CodeDeployLambdaAliasUpdate") or {}
            group_name = (update.get("DeploymentGroupName") or {}).get("Ref")
            group = res.get(group_name) or {}
            if group.get("Type") != "AWS::CodeDeploy::DeploymentGroup":
                yield path, f"{name}: no alias shifted by a CodeDeploy deployment group (AutoPublishAlias, DeploymentPreference)"
                continue
            props = group.get("Properties") or {}
            if not any("Canary10Percent5Minutes" in str(v) for v in branches(props.get("DeploymentConfigName"))):
                yield path, f"{name}: DeploymentConfigName {props.get('DeploymentConfigName')} offers no canary"
            alarms = props.get("AlarmConfiguration") or {}
            got = [(a.get("Name") or {}).get("Ref") for a in alarms.get("Alarms") or [] if isinstance(a.get("Name"), dict)]
            for a in ROLLBACK_ALARMS + SENDER_ALARMS.get(name, []):
                if a not in got or not alarms.get("Enabled"):
                    yield path, f"{name}: deployment does not roll back on {a} (has {got})"
                elif (res.get(a) or {}).get("Type") != "AWS::CloudWatch::Alarm":
                    yield path, f"{name}: rollback alarm {a} is not an AWS::CloudWatch::Alarm of this template"
            rollback = props.get("AutoRollbackConfiguration") or {}
            if not rollback.get("Enabled") or "DEPLOYMENT_STOP_ON_ALARM" not in (rollback.get("Events") or []):
                yield path, f"{name}: deployment does not roll back when an alarm fires"


class RedactKeySecret(_Check, CloudFormationLintRule):
    id = "E9108"
    shortdesc = "Every function reads the generated address-token key, and no other secret"
    description = ("RedactKeySecret is a generated 64-character secret, passed to every function as "
                   "SENDONCE_REDACT_KEY_PARAM; each function's role may GetSecretValue on it and on nothing else.")

    def check(self, cfn):
        res = cfn.template.get("Resources") or {}
        sec = res.get("RedactKeySecret") or {}
        props = sec.get("Properties") or {}
        if sec.get("Type") != "AWS::SecretsManager::Secret" or "SecretString" in props \
                or (props.get("GenerateSecretString") or {}).get("PasswordLength") != 64:
            yield ["Resources", "RedactKeySecret"], "RedactKeySecret: want a generated 64-character Secrets Manager secret"
        for name, _, props in resources(cfn, "AWS::Lambda::Function"):
            path = ["Resources", name]
            if ((props.get("Environment") or {}).get("Variables") or {}).get("SENDONCE_REDACT_KEY_PARAM") != REDACT_KEY:
                yield path, f"{name}: SENDONCE_REDACT_KEY_PARAM is not !Ref RedactKeySecret"
            role = res.get(get_att(props.get("Role")) or "") or {}
            reads = 0
            for pol in (role.get("Properties") or {}).get("Policies") or []:
                for st in branches((pol.get("PolicyDocument") or {}).get("Statement", [])):
                    sm = [a for a in strings(st.get("Action")) if a.lower().startswith("secretsmanager:")]
                    if sm:
                        reads += 1
                        if sm != ["secretsmanager:GetSecretValue"] or st.get("Resource") != REDACT_KEY:
                            yield path, f"{name}: its role's {sm} on {st.get('Resource')}: want GetSecretValue on RedactKeySecret only"
            if reads != 1:
                yield path, f"{name}: {reads} statements of its role read Secrets Manager, want 1 (the redaction key)"


class OneLedgerTable(_Check, CloudFormationLintRule):
    id = "E9109"
    shortdesc = "Each LedgerMode creates at most one table, and every function names it"
    description = ("Each DynamoDB table is created under its own LedgerMode (existing creates none), and every "
                   "function's SENDONCE_TABLE is the table's TableName.")

    def check(self, cfn):
        conds = cfn.template.get("Conditions") or {}
        modes = {}
        tables = list(resources(cfn, "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"))
        for name, res, props in tables:
            eq = list((conds.get(res.get("Condition")) or {}).get("Fn::Equals") or [])
            # cfn-lint may put the literal first
            mode = next((m for m in eq if isinstance(m, str)), None) if {"Ref": "LedgerMode"} in eq else None
            if mode is None or mode == "existing" or mode in modes.values():
                yield ["Resources", name], f"{name}: Condition is not Equals [LedgerMode, <a mode of its own>]"
            modes[name] = mode
        for name, _, props in resources(cfn, "AWS::Lambda::Function"):
            got = ((props.get("Environment") or {}).get("Variables") or {}).get("SENDONCE_TABLE")
            for table, _, tprops in tables:
                if got != tprops.get("TableName"):
                    yield ["Resources", name], f"{name}: SENDONCE_TABLE {got} is not {table}'s TableName {tprops.get('TableName')}"
