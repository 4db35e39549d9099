"""sendonce's cfn-lint rules: properties of template.yaml that no built-in
rule checks. cfn-lint applies them to the template after the SAM
transform, so they read the CloudFormation that `sam deploy` submits
(E9111 also reads the SAM template itself, for what the transform drops).

    cfn-lint --append-rules scripts/cfnlint_rules template.yaml   # make lint

The arithmetic between parameters and the table schema are checked by the
Go tests in infra/; the negative tests of these rules are in
scripts/test_cfnlint_rules.py.
"""
import re

from cfnlint.decode import decode
from cfnlint.rules import CloudFormationLintRule, RuleMatch

ROLLBACK_ALARMS = ["FencingLostAlarm", "UncertainAttemptsAlarm"]
# Each function's deployment also rolls back on its own errors alarm (the
# SES events function's cannot: SAM creates the deployment group of a
# function under a Condition unconditionally, and its alarm is not).
OWN_ALARMS = {"SenderFunction": ["SenderErrorsAlarm"], "ReconcilerFunction": ["ReconcilerErrorsAlarm"],
              "ReconcileWorkerFunction": ["ReconcileWorkerErrorsAlarm"],
              "WebhookFunction": ["WebhookErrorsAlarm"], "ApiFunction": ["ApiErrorsAlarm"]}
REDACT_KEY = {"Ref": "RedactKeySecret"}
FUNCTION = "AWS::Lambda::Function"


def rule(rule_id, shortdesc):
    """Makes check(cfn), which yields (path, message) pairs, the cfn-lint
    rule rule_id, described by its docstring; the class keeps check for the
    negative tests."""
    def make(check):
        return type(check.__name__, (CloudFormationLintRule,), {
            "id": rule_id, "shortdesc": shortdesc, "description": " ".join(check.__doc__.split()), "tags": ["sendonce"],
            "source_url": "https://github.com/sendonce/sendonce/blob/main/scripts/cfnlint_rules/sendonce.py",
            "check": staticmethod(check),
            "match": lambda self, cfn: [RuleMatch(path, msg) for path, msg in check(cfn)],
        })
    return make


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


def allows(docs):
    """The Allow statements of the policy documents, through Fn::If."""
    return [st for doc in docs for st in branches((doc or {}).get("Statement", []))
            if isinstance(st, dict) and st.get("Effect") == "Allow"]


def statements(cfn):
    """Yields (path, statement) of every Allow statement of the template's
    IAM roles and policies."""
    for name, res, props in resources(cfn, "AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        for st in allows(role_docs(props) if res["Type"] == "AWS::IAM::Role" else [props.get("PolicyDocument")]):
            yield ["Resources", name], st


def role_docs(props):
    return [p.get("PolicyDocument") for p in props.get("Policies") or []]


def get_att(v, attr="Arn"):
    """The resource named by {"Fn::GetAtt": [name, attr]}, or None."""
    args = v.get("Fn::GetAtt") if isinstance(v, dict) else None
    return args[0] if isinstance(args, list) and len(args) == 2 and args[1] == attr else None


def env(props):
    return (props.get("Environment") or {}).get("Variables") or {}


@rule("E9101", "SQS event sources report batch item failures")
def PartialBatchResponse(cfn):
    """Without ReportBatchItemFailures one failed record makes the whole batch
    redeliver."""
    for name, _, props in resources(cfn, "AWS::Lambda::EventSourceMapping"):
        queue = get_att(props.get("EventSourceArn"))
        if queue and cfn.template["Resources"].get(queue, {}).get("Type") == "AWS::SQS::Queue":
            if "ReportBatchItemFailures" not in strings(props.get("FunctionResponseTypes")):
                yield ["Resources", name, "Properties"], f"{name}: FunctionResponseTypes lacks ReportBatchItemFailures"


PLATFORM = {"Runtime": "provided.al2023", "Architectures": ["arm64"], "Handler": "bootstrap",
            "Metadata.BuildMethod": "makefile", "LoggingConfig.LogFormat": "JSON"}


@rule("E9102", "Functions are Go bootstraps on arm64 provided.al2023 with JSON logs")
def FunctionPlatform(cfn):
    """Every function is built by make (BuildMethod makefile) for the platform it
    runs on."""
    for name, res, props in resources(cfn, FUNCTION):
        got = {**{k: props.get(k) for k in ("Runtime", "Architectures", "Handler")},
               "Metadata.BuildMethod": (res.get("Metadata") or {}).get("BuildMethod"),
               "LoggingConfig.LogFormat": (props.get("LoggingConfig") or {}).get("LogFormat")}
        for k, v in PLATFORM.items():
            if got[k] != v:
                yield ["Resources", name], f"{name}: {k} is {got[k]!r}, want {v!r}"


@rule("E9103", "No policy grants every action, or DynamoDB on every table")
def NoWildcardPolicies(cfn):
    """Action '*', 'service:*' and NotAction grant more than the code calls;
    DynamoDB actions name the table."""
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


@rule("E9104", "sns:Publish never reaches every topic and endpoint")
def SnsPublishScoped(cfn):
    """SMS (a phone number has no ARN) is authorised against '*', so its grant
    excludes every SNS ARN with NotResource; other grants name their resources."""
    for path, st in statements(cfn):
        if "sns:Publish" not in strings(st.get("Action")):
            continue
        if "*" in strings(st.get("Resource")):
            yield path, f"{path[1]}: sns:Publish on Resource '*' reaches every topic and endpoint"
        elif "NotResource" in st and st["NotResource"] != {"Fn::Sub": "arn:${AWS::Partition}:sns:*:*:*"}:
            yield path, f"{path[1]}: sns:Publish NotResource {st['NotResource']} does not exclude every SNS ARN"
        elif "NotResource" not in st and "Resource" not in st:
            yield path, f"{path[1]}: sns:Publish without Resource"


BOUNDARY = {"Fn::If": ["HasPermissionsBoundary", {"Ref": "PermissionsBoundary"}, {"Ref": "AWS::NoValue"}]}


@rule("E9105", "Every role takes the PermissionsBoundary parameter")
def PermissionsBoundary(cfn):
    """An organisation's permissions boundary applies to every role the stack
    creates."""
    for name, _, props in resources(cfn, "AWS::IAM::Role"):
        if props.get("PermissionsBoundary") != BOUNDARY:
            yield ["Resources", name], f"{name}: PermissionsBoundary is {props.get('PermissionsBoundary')}, want {BOUNDARY}"


@rule("E9106", "Every parameter is described, constrained, grouped and labelled")
def ParametersDocumented(cfn):
    """`sam deploy --guided` and the console ask for every parameter: each says
    what it is, a String takes AllowedPattern or AllowedValues, and it sits in
    one ParameterGroups entry with a label."""
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


@rule("E9107", "Every function shifts traffic through CodeDeploy and rolls back on the alarms")
def GradualDeployment(cfn):
    """Each function publishes an alias updated by a CodeDeploy deployment group
    that offers a canary and rolls back when FencingLost, UncertainAttempts
    or the function's own errors alarm fires. The Serverless Application
    Repository's edition (template.sar.yaml: the repository's metadata and
    no CodeDeploy resource at all, as CodeDeploy's types are not on the
    repository's list) only publishes each function behind its alias;
    template.yaml, made from the same source without that metadata, keeps
    the full check."""
    res = cfn.template.get("Resources") or {}
    if "AWS::ServerlessRepo::Application" in (cfn.template.get("Metadata") or {}) and \
            not any(isinstance(r, dict) and str(r.get("Type", "")).startswith("AWS::CodeDeploy::") for r in res.values()):
        aliases = {(p.get("FunctionName") or {}).get("Ref") for _, _, p in resources(cfn, "AWS::Lambda::Alias")}
        for name, _, _ in resources(cfn, FUNCTION):
            if name not in aliases:
                yield ["Resources", name], f"{name}: no alias (AutoPublishAlias)"
        return
    aliases = {(p.get("FunctionName") or {}).get("Ref"): a for _, a, p in resources(cfn, "AWS::Lambda::Alias")}
    for name, _, _ in resources(cfn, FUNCTION):
        path = ["Resources", name]
        update = ((aliases.get(name) or {}).get("UpdatePolicy") or {}).get("CodeDeployLambdaAliasUpdate") or {}
        group = res.get((update.get("DeploymentGroupName") or {}).get("Ref")) or {}
        if group.get("Type") != "AWS::CodeDeploy::DeploymentGroup":
            yield path, f"{name}: no alias shifted by a CodeDeploy deployment group (AutoPublishAlias, DeploymentPreference)"
            continue
        props = group.get("Properties") or {}
        if not any("Canary10Percent5Minutes" in str(v) for v in branches(props.get("DeploymentConfigName"))):
            yield path, f"{name}: DeploymentConfigName {props.get('DeploymentConfigName')} offers no canary"
        alarms = props.get("AlarmConfiguration") or {}
        got = [(a.get("Name") or {}).get("Ref") for a in alarms.get("Alarms") or [] if isinstance(a.get("Name"), dict)]
        for a in ROLLBACK_ALARMS + OWN_ALARMS.get(name, []):
            if a not in got or not alarms.get("Enabled"):
                yield path, f"{name}: deployment does not roll back on {a} (has {got})"
            elif (res.get(a) or {}).get("Type") != "AWS::CloudWatch::Alarm":
                yield path, f"{name}: rollback alarm {a} is not an AWS::CloudWatch::Alarm of this template"
        rollback = props.get("AutoRollbackConfiguration") or {}
        if not rollback.get("Enabled") or "DEPLOYMENT_STOP_ON_ALARM" not in (rollback.get("Events") or []):
            yield path, f"{name}: deployment does not roll back when an alarm fires"


REDACT_PARAM = {"Ref": "RedactKeyParam"}
REDACT_PARAM_ARN = {"Fn::Sub": "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter${RedactKeyParam}"}


@rule("E9108", "Every function reads the address-token key, and no other secret")
def RedactKeySecret(cfn):
    """The address-token key is a generated 64-character Secrets Manager secret
    (RedactKeySecret) or the SSM SecureString RedactKeyParam names (or, with
    both, the first when the second is empty); every function gets it as
    SENDONCE_REDACT_KEY_PARAM, and its role may read it: GetSecretValue on the
    generated secret and on no other secret, GetParameter on that parameter."""
    res = cfn.template.get("Resources") or {}
    has_secret = "RedactKeySecret" in res
    has_param = "RedactKeyParam" in (cfn.template.get("Parameters") or {})
    sec = res.get("RedactKeySecret") or {}
    props = sec.get("Properties") or {}
    if has_secret and (sec.get("Type") != "AWS::SecretsManager::Secret" or "SecretString" in props
                       or (props.get("GenerateSecretString") or {}).get("PasswordLength") != 64):
        yield ["Resources", "RedactKeySecret"], "RedactKeySecret: want a generated 64-character Secrets Manager secret"
    if not has_secret and not has_param:
        yield ["Resources"], "no address-token key: neither RedactKeySecret nor a RedactKeyParam parameter"
        return
    want = REDACT_KEY if not has_param else REDACT_PARAM if not has_secret else \
        {"Fn::If": ["CreateRedactKey", REDACT_KEY, REDACT_PARAM]}
    for name, _, props in resources(cfn, FUNCTION):
        path = ["Resources", name]
        if env(props).get("SENDONCE_REDACT_KEY_PARAM") != want:
            yield path, f"{name}: SENDONCE_REDACT_KEY_PARAM is {env(props).get('SENDONCE_REDACT_KEY_PARAM')}, want {want}"
        secret_reads = param_reads = 0
        for st in allows(role_docs((res.get(get_att(props.get("Role")) or "") or {}).get("Properties") or {})):
            actions = strings(st.get("Action"))
            sm = [a for a in actions if a.lower().startswith("secretsmanager:")]
            if sm:
                secret_reads += 1
                if sm != ["secretsmanager:GetSecretValue"] or st.get("Resource") != REDACT_KEY:
                    yield path, f"{name}: its role's {sm} on {st.get('Resource')}: want GetSecretValue on RedactKeySecret only"
            if st.get("Resource") == REDACT_PARAM_ARN:
                param_reads += 1
                if actions != ["ssm:GetParameter"]:
                    yield path, f"{name}: its role's {actions} on RedactKeyParam: want ssm:GetParameter only"
        if secret_reads != int(has_secret):
            yield path, f"{name}: {secret_reads} statements of its role read Secrets Manager, want {int(has_secret)} (the generated key)"
        if param_reads != int(has_param):
            yield path, f"{name}: {param_reads} statements of its role read RedactKeyParam, want {int(has_param)}"


@rule("E9109", "Each LedgerMode creates at most one table, and every function names it")
def OneLedgerTable(cfn):
    """Each DynamoDB table is created under its own LedgerMode (existing creates
    none), and every function's SENDONCE_TABLE is the table's TableName."""
    conds = cfn.template.get("Conditions") or {}
    modes = []
    tables = list(resources(cfn, "AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"))
    if "LedgerMode" not in (cfn.template.get("Parameters") or {}):  # a variant with the mode fixed
        if len(tables) != 1 or "Condition" in tables[0][1]:
            yield ["Resources"], f"without a LedgerMode parameter, want one table, unconditional; have {[t[0] for t in tables]}"
        tables = tables[:1]
    for name, res, _ in (t for t in tables if "LedgerMode" in (cfn.template.get("Parameters") or {})):
        eq = list((conds.get(res.get("Condition")) or {}).get("Fn::Equals") or [])
        # cfn-lint may put the literal first
        mode = next((m for m in eq if isinstance(m, str)), None) if {"Ref": "LedgerMode"} in eq else None
        if mode is None or mode == "existing" or mode in modes:
            yield ["Resources", name], f"{name}: Condition is not Equals [LedgerMode, <a mode of its own>]"
        modes.append(mode)
    for name, _, props in resources(cfn, FUNCTION):
        got = env(props).get("SENDONCE_TABLE")
        for table, _, tprops in tables:
            if got != tprops.get("TableName"):
                yield ["Resources", name], f"{name}: SENDONCE_TABLE {got} is not {table}'s TableName {tprops.get('TableName')}"


def ref(name):
    return {"Ref": name}


def sub(fmt):
    return {"Fn::Sub": fmt}


# What infra/invariants.go relates: the property each timing parameter sets.
TIMING = {
    "SenderFunction": {"Timeout": ref("SenderTimeoutSeconds")},
    "NotificationQueue": {
        "VisibilityTimeout": ref("QueueVisibilityTimeoutSeconds"),
        "MessageRetentionPeriod": ref("QueueRetentionSeconds"),
        "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["NotificationDLQ", "Arn"]},
                          "maxReceiveCount": ref("MaxReceiveCount")},
    },
    "NotificationDLQ": {"MessageRetentionPeriod": ref("DLQRetentionSeconds")},
}
# The variables the invariants read; None: unset (SENDONCE_MAX_AGE is
# decide.DefaultMaxAge, which the invariants use).
CLAIM_ENV = {"SENDONCE_PROVIDER_TIMEOUT": sub("${ProviderTimeoutSeconds}s"),
             "SENDONCE_CLAIM_TIMEOUT": sub("${ClaimTimeoutSeconds}s"), "SENDONCE_RETENTION": sub("${RetentionHours}h")}
TIMING_ENV = {"SenderFunction": CLAIM_ENV, "ReconcilerFunction": {**CLAIM_ENV, "SENDONCE_MAX_AGE": None},
              "ReconcileWorkerFunction": {**CLAIM_ENV, "SENDONCE_MAX_AGE": None}}
BATCHING_WINDOW = {"Fn::If": ["IsFifo", ref("AWS::NoValue"), ref("MaximumBatchingWindowInSeconds")]}


INTRINSICS = ("Ref", "Fn::Sub", "Fn::If", "Fn::GetAtt")


def param_names(v):
    """The parameters v (a Ref, a Fn::Sub string or a Fn::If) names."""
    if isinstance(v, dict) and len(v) == 1:
        (fn, arg), = v.items()
        if fn == "Ref":
            return {arg}
        if fn == "Fn::Sub" and isinstance(arg, str):
            return set(re.findall(r"\$\{([A-Za-z0-9]+)\}", arg))
        if fn == "Fn::If":
            return param_names(arg[1]) | param_names(arg[2])
    return set()


def literal(v):
    """True when v holds no intrinsic function."""
    if isinstance(v, dict):
        return not any(k in INTRINSICS for k in v) and all(literal(x) for x in v.values())
    if isinstance(v, list):
        return all(literal(x) for x in v)
    return True


def fits(cfn, got, want):
    """got is want, or, in a variant that fixes want's parameters at their
    defaults (template.yaml, made from template.full.yaml), a literal value;
    a mapping fits key by key."""
    if got == want:
        return True
    if isinstance(want, dict) and isinstance(got, dict) and not set(want) & set(INTRINSICS):
        return set(got) == set(want) and all(fits(cfn, got[k], want[k]) for k in want)
    params = cfn.template.get("Parameters") or {}
    names = param_names(want)
    return bool(names) and not names & set(params) and got is not None and literal(got)


@rule("E9110", "The timing parameters set the properties the infra/ invariants relate")
def TimingParameters(cfn):
    """infra/ checks the arithmetic between the timing parameters; this checks
    that each sets its property: the sender's timeout and SQS event source, the
    queues, and the functions' timing variables (in template.yaml, which fixes
    them, to a literal value)."""
    res = cfn.template.get("Resources") or {}
    for name, want in TIMING.items():
        props = (res.get(name) or {}).get("Properties") or {}
        for k, v in want.items():
            if not fits(cfn, props.get(k), v):
                yield ["Resources", name], f"{name}: {k} is {props.get(k)}, want {v}"
    for name, _, props in resources(cfn, FUNCTION):
        want = {"SENDONCE_RETENTION": CLAIM_ENV["SENDONCE_RETENTION"]} if "SENDONCE_RETENTION" in env(props) else {}
        for k, v in {**want, **TIMING_ENV.get(name, {})}.items():
            if not (env(props).get(k) == v or v is not None and fits(cfn, env(props).get(k), v)):
                yield ["Resources", name], f"{name}: {k} is {env(props).get(k)}, want {v}"
    polls = [(name, props) for name, _, props in resources(cfn, "AWS::Lambda::EventSourceMapping")
             if (res.get(get_att(props.get("EventSourceArn")) or "") or {}).get("Type") == "AWS::SQS::Queue"]
    for name, props in polls:
        target = (props.get("FunctionName") or {}).get("Ref")
        if (res.get(target) or {}).get("Type") == "AWS::Lambda::Alias":
            target = (res[target]["Properties"].get("FunctionName") or {}).get("Ref")
        if (target, get_att(props["EventSourceArn"])) == ("ReconcileWorkerFunction", "ReconcileUnitQueue"):
            continue
        if (target, get_att(props["EventSourceArn"])) != ("SenderFunction", "NotificationQueue"):
            yield ["Resources", name], f"{name}: polls {get_att(props['EventSourceArn'])} for {target}; only SenderFunction polls NotificationQueue (and ReconcileWorkerFunction ReconcileUnitQueue)"
        elif not fits(cfn, props.get("MaximumBatchingWindowInSeconds"), BATCHING_WINDOW):
            yield ["Resources", name], f"{name}: MaximumBatchingWindowInSeconds is {props.get('MaximumBatchingWindowInSeconds')}, want {BATCHING_WINDOW}"
    if len(polls) != 2:
        yield ["Resources"], f"{len(polls)} SQS event sources, want 2 (SenderFunction on NotificationQueue, ReconcileWorkerFunction on ReconcileUnitQueue)"


# The partition-key prefixes of the one table's record types (package
# tableschema), as IAM's dynamodb:LeadingKeys patterns.
LEDGER, CALLBACKS, IDEMPOTENCY, RATE, API_KEYS, TEMPLATES, ATTENTION, PACE, OWNERS, STATUS = \
    "v1_*", "cb#*", "idem#*", "rate#*", "apikey#*", "tpl#*", "attn#*", "pace#*", "pmid#*", "ops#*"
# Logs, tracing and the log-redaction key (a generated secret, or an SSM
# SecureString decrypted through SSM), which every role may hold.
BASE = ["logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments", "xray:PutTelemetryRecords",
        "secretsmanager:GetSecretValue", "ssm:GetParameter", "kms:Decrypt"]
# What the sender and the reconciler need to reach the providers: SNS (SMS
# and push), SES, provider secrets from SSM, and each channel's provider
# function (E9112 checks which).
SEND = ["sns:Publish", "ses:SendEmail", "ssm:GetParameter", "kms:Decrypt", "lambda:InvokeFunction"]
# Each function's least privilege: exactly the DynamoDB calls its code makes
# on each record type (package comments of dynamoledger, webhook, api,
# apikey), and the other actions it may hold. The reconciler never creates
# a row (no PutItem) and renders a resend's stored template version again.
# Both render stored templates: the sender resolves a first attempt's
# template (Resolve: a BatchGetItem of the candidate heads), and both read
# the version a row pinned (render.RenderVersion through dynamotemplates.Get,
# a GetItem: every attempt after the first). The sender reads a ledger row
# only for a message whose stored template is missing (Sender.unknownTemplate);
# the workers read each unit's rows, and never resolve a template. The
# sender reads a provider's hold (pace#<provider>#hold: a GetItem, package
# pace, "Earliest deadline first"); the workers write it (UpdateItem).
GRANTS = {
    "SenderFunction": ({LEDGER: ["GetItem", "PutItem", "UpdateItem"], TEMPLATES: ["BatchGetItem", "GetItem"], PACE: ["GetItem", "UpdateItem"],
                        OWNERS: ["PutItem", "BatchGetItem"], STATUS: ["UpdateItem"]},
                       BASE + SEND + ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility",
                                      "sqs:GetQueueAttributes", "sqs:SendMessage", "kms:GenerateDataKey"]),
    # The reconciler finds the work and hands it out; its workers do it.
    # All three record what `sendonce status` shows (package opstate): the
    # providers known down or paused, the last reconcile run. The
    # reconciler also reads the providers' down and up states (GetItem):
    # its Find tells the workers of a recovery, and its run's watch hands
    # out at once when a provider answers again (reconcile.Reconciler.Watch).
    "ReconcilerFunction": ({ATTENTION: ["Query"], STATUS: ["UpdateItem", "GetItem"]}, BASE + ["sqs:SendMessage", "sqs:GetQueueAttributes"]),
    "ReconcileWorkerFunction": ({LEDGER: ["GetItem", "UpdateItem"], TEMPLATES: ["GetItem"], PACE: ["UpdateItem"],
                                 OWNERS: ["PutItem", "BatchGetItem"], STATUS: ["UpdateItem"]},
                                BASE + SEND + ["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility",
                                               "sqs:GetQueueAttributes"]),
    "WebhookFunction": ({CALLBACKS: ["GetItem", "PutItem"], LEDGER: ["GetItem", "UpdateItem"]},
                        BASE + ["ssm:GetParameter", "kms:Decrypt"]),
    "ApiFunction": ({IDEMPOTENCY: ["PutItem", "UpdateItem", "DeleteItem"], RATE: ["UpdateItem"],
                     API_KEYS: ["GetItem"], LEDGER: ["GetItem"]},
                    BASE + ["sqs:SendMessage", "kms:Decrypt", "kms:GenerateDataKey"]),
    "SesEventsFunction": ({CALLBACKS: ["GetItem", "PutItem"], LEDGER: ["GetItem", "UpdateItem"]}, BASE),
}


def sam_template(cfn):
    """The SAM template cfn-lint transformed (a rule sees the result)."""
    return getattr(cfn, "sam", None) or decode(cfn.filename)[0] or {}


def role_grants(cfn, role):
    """The DynamoDB actions per LeadingKeys prefix and the other actions
    role's Allow statements hold, across all parameter values, and the
    DynamoDB statements without a ForAllValues:StringLike LeadingKeys."""
    props = (cfn.template["Resources"].get(role) or {}).get("Properties") or {}
    docs = role_docs(props) + [p.get("PolicyDocument") for _, _, p in resources(cfn, "AWS::IAM::Policy")
                               if ref(role) in (p.get("Roles") or [])]
    dynamo, other, unscoped = {}, set(), []
    for st in allows(docs):
        actions = strings(st.get("Action"))
        other |= {a for a in actions if not a.startswith("dynamodb:")}
        calls = {a.removeprefix("dynamodb:") for a in actions if a.startswith("dynamodb:")}
        keys = strings(((st.get("Condition") or {}).get("ForAllValues:StringLike") or {}).get("dynamodb:LeadingKeys"))
        if calls and not keys:
            unscoped.append(sorted(calls))
        for k in keys:
            dynamo[k] = dynamo.get(k, set()) | calls
    return dynamo, other, unscoped


@rule("E9111", "Each function's role holds exactly its own grants")
def FunctionGrants(cfn):
    """Every function has an explicit role of its own (no SAM Policies, which SAM
    drops beside Role), whose DynamoDB actions are each scoped by
    dynamodb:LeadingKeys to the record types its code calls them on, and which
    holds no other action than GRANTS lists for it."""
    for name, res in (sam_template(cfn).get("Resources") or {}).items():
        if res.get("Type") == "AWS::Serverless::Function" and "Policies" in (res.get("Properties") or {}):
            yield ["Resources", name], f"{name}: SAM ignores Policies beside an explicit Role; put them on its role"
    owner = {}
    for name, _, props in resources(cfn, FUNCTION):
        path, role = ["Resources", name], get_att(props.get("Role"))
        if name not in GRANTS:
            yield path, f"{name}: no entry in GRANTS (scripts/cfnlint_rules/sendonce.py): declare what it may do"
            continue
        if role in owner or (cfn.template["Resources"].get(role) or {}).get("Type") != "AWS::IAM::Role":
            yield path, f"{name}: Role {props.get('Role')} is not a role of its own (shared with {owner.get(role)})"
            continue
        owner[role] = name
        if "ManagedPolicyArns" in cfn.template["Resources"][role].get("Properties", {}):
            yield path, f"{name}: {role} has managed policies (a SAM-generated role?): grant inline"
        dynamo, other, unscoped = role_grants(cfn, role)
        want_dynamo, want_other = GRANTS[name]
        for calls in unscoped:
            yield path, f"{name}: DynamoDB {calls} without a ForAllValues:StringLike dynamodb:LeadingKeys condition"
        for prefix in sorted(set(dynamo) | set(want_dynamo)):
            got, want = dynamo.get(prefix, set()), set(want_dynamo.get(prefix, []))
            if got != want:
                yield path, f"{name}: may {sorted(got)} on {prefix!r}, want exactly {sorted(want)}"
        if other - set(want_other):
            yield path, f"{name}: holds {sorted(other - set(want_other))}, which it never calls"


# Each channel's provider function: its parameter, and the Condition that
# its route includes lambda and the parameter is set (infra's
# TestRouteConditions checks what each Condition means).
LAMBDA_PROVIDERS = {"SmsLambdaArn": "SmsInvokesFunction", "EmailLambdaArn": "EmailInvokesFunction",
                    "PushLambdaArn": "PushInvokesFunction"}
SENDERS = ["SenderFunction", "ReconcileWorkerFunction"]


def guarded(v, conds=()):
    """Yields (conds, value) for v and, through every Fn::If, its branches,
    conds holding the (condition, branch taken) pairs around each."""
    if isinstance(v, dict) and len(v) == 1 and "Fn::If" in v and len(v["Fn::If"]) == 3:
        c = v["Fn::If"][0]
        yield from guarded(v["Fn::If"][1], conds + ((c, True),))
        yield from guarded(v["Fn::If"][2], conds + ((c, False),))
    elif isinstance(v, list):
        for e in v:
            yield from guarded(e, conds)
    else:
        yield conds, v


@rule("E9112", "The sender and the reconciler invoke exactly the channels' provider functions")
def LambdaProviders(cfn):
    """lambda:InvokeFunction is granted to the sender's and the reconciler's
    roles only, each time on one channel's function (the Ref of its
    <Channel>LambdaArn parameter, as configured) under the Condition
    <Channel>InvokesFunction (its route includes lambda, and the ARN is set),
    and on every channel's where the template has the parameter; never on a
    wildcard or another function."""
    params = cfn.template.get("Parameters") or {}
    res = cfn.template.get("Resources") or {}
    want = {(arn, cond) for arn, cond in LAMBDA_PROVIDERS.items() if arn in params}
    roles = {get_att((res.get(fn, {}).get("Properties") or {}).get("Role")): fn for fn in SENDERS}
    for name, r, props in resources(cfn, "AWS::IAM::Role", "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        docs = role_docs(props) if r["Type"] == "AWS::IAM::Role" else [props.get("PolicyDocument")]
        got = set()
        for doc in docs:
            for conds, st in guarded((doc or {}).get("Statement", [])):
                if not isinstance(st, dict) or st.get("Effect") != "Allow" or \
                        not any(a.lower() in ("lambda:invokefunction", "lambda:*", "*") for a in strings(st.get("Action"))):
                    continue
                if name not in roles:
                    yield ["Resources", name], f"{name}: lambda:InvokeFunction, but only {SENDERS} invoke provider functions"
                    continue
                arn = (st.get("Resource") or {}).get("Ref") if isinstance(st.get("Resource"), dict) else None
                if arn not in LAMBDA_PROVIDERS or "NotResource" in st:
                    yield ["Resources", name], f"{name}: lambda:InvokeFunction on {st.get('Resource') or st.get('NotResource')}, want one <Channel>LambdaArn"
                    continue
                if (LAMBDA_PROVIDERS[arn], True) not in conds:
                    yield ["Resources", name], f"{name}: lambda:InvokeFunction on {arn} outside Fn::If {LAMBDA_PROVIDERS[arn]} (conditions {list(conds)})"
                    continue
                got.add((arn, LAMBDA_PROVIDERS[arn]))
        if name in roles and got != want:
            yield ["Resources", name], f"{name} ({roles[name]}): invokes {sorted(got)}, want {sorted(want)}"


def rule_value(v, params):
    """The value of v in a Rules assertion with the parameter values params:
    a literal, a Ref to a parameter, or Fn::Equals, Fn::Not, Fn::And,
    Fn::Or, Fn::Contains of those; None when it cannot be evaluated."""
    if isinstance(v, (str, int, float, bool)):
        return str(v).lower() if isinstance(v, bool) else str(v)
    if isinstance(v, list):
        out = [rule_value(e, params) for e in v]
        return None if None in out else out
    if not isinstance(v, dict) or len(v) != 1:
        return None
    (fn, arg), = v.items()
    if fn == "Ref":
        return params.get(arg)
    args = arg if isinstance(arg, list) else [arg]
    vals = [rule_value(a, params) for a in args]
    if None in vals:
        return None
    if fn == "Fn::Equals" and len(vals) == 2:
        return vals[0] == vals[1]
    if fn == "Fn::Not" and len(vals) == 1 and isinstance(vals[0], bool):
        return not vals[0]
    if fn in ("Fn::And", "Fn::Or") and all(isinstance(x, bool) for x in vals):
        return all(vals) if fn == "Fn::And" else any(vals)
    if fn == "Fn::Contains" and len(vals) == 2 and isinstance(vals[0], list):
        return vals[1] in vals[0]
    return None


def refused_by(cfn, params):
    """The names of the template's Rules that refuse the parameter values
    params (the others at their defaults), as CloudFormation evaluates them
    before it creates anything; a Rule it cannot evaluate refuses nothing
    here."""
    values = {n: str(p.get("Default", "")).lower() if isinstance(p.get("Default"), bool) else str(p.get("Default", ""))
              for n, p in (cfn.template.get("Parameters") or {}).items()}
    values.update(params)
    out = []
    for name, r in (cfn.template.get("Rules") or {}).items():
        if "RuleCondition" in r and rule_value(r["RuleCondition"], values) is not True:
            continue
        if any(rule_value(a.get("Assert"), values) is False for a in r.get("Assertions") or []):
            out.append(name)
    return out


ALARM_EMAIL, ALARM_TOPIC = "oncall@example.com", "arn:aws:sns:us-east-1:123456789012:pager"


@rule("E9120", "A stack's alarms reach a person: a Rule refuses one with neither AlarmEmail nor AlarmTopicArn")
def AlarmDestination(cfn):
    """Every alarm notifies the stack's topic or AlarmTopicArn's. With
    AlarmEmail and AlarmTopicArn both empty the created topic has no
    subscriber, so a Rule must refuse those values, and no Rule may refuse a
    stack that sets either one alone (the other parameters at their
    defaults)."""
    params = cfn.template.get("Parameters") or {}
    if "AlarmEmail" not in params or "AlarmTopicArn" not in params:
        yield ["Parameters"], "AlarmEmail and AlarmTopicArn: want both parameters (where the alarms go)"
        return
    if not refused_by(cfn, {"AlarmEmail": "", "AlarmTopicArn": ""}):
        yield ["Rules"], "no Rule refuses AlarmEmail and AlarmTopicArn both empty: the alarms would reach nobody"
    for given in ({"AlarmEmail": ALARM_EMAIL, "AlarmTopicArn": ""}, {"AlarmEmail": "", "AlarmTopicArn": ALARM_TOPIC}):
        if refused_by(cfn, given):
            yield ["Rules"], f"Rules {refused_by(cfn, given)} refuse {given} (the other parameters at their defaults): one alarm destination is enough"
