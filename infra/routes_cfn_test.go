package infra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/sendonce/sendonce/internal/lambdaenv"
	"github.com/sendonce/sendonce/internal/metrics"
	"github.com/sendonce/sendonce/internal/provider/lambdaprovider"
	"github.com/sendonce/sendonce/internal/provider/registry"
)

// translatedTemplate returns the CloudFormation the SAM template name
// translates to (translate), as a Template.
func translatedTemplate(t *testing.T, name string) *Template {
	t.Helper()
	data, err := json.Marshal(translate(t, name))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// roleOf returns the role function fn runs as.
func roleOf(t *testing.T, tpl *Template, fn string) string {
	t.Helper()
	role := getAttName(mapOf(tpl.Resources[fn]["Properties"])["Role"])
	if tpl.Resources[role] == nil {
		t.Fatalf("%s has no role of the template", fn)
	}
	return role
}

// strs returns v, a string or a list, as strings (what is not a string
// printed).
func strs(v any) []string {
	var out []string
	switch x := v.(type) {
	case nil:
	case []any:
		for _, e := range x {
			out = append(out, strs(e)...)
		}
	case string:
		out = append(out, x)
	default:
		out = append(out, fmt.Sprint(x))
	}
	return out
}

// providerGrants returns what role may do with the providers under
// parameter values p, one label per grant: "<channel>/sns" (SNS SMS
// publishes for sms, platform endpoints for push), "email/ses",
// "<channel>/lambda" (InvokeFunction on exactly that channel's
// <Prefix>LambdaArn), "<provider>/secret" (ssm:GetParameter on exactly
// that provider's secret parameter), "kms:Decrypt" (secrets through
// SSM); any other grant of these actions, or an action no function of
// the stack needs besides, is labelled with its action and resource.
func providerGrants(t *testing.T, tpl *Template, role string, p Values) []string {
	t.Helper()
	r := tpl.Resources[role]
	if c, ok := r["Condition"].(string); ok {
		holds, err := (&eval{t: tpl, p: p}).cond(map[string]any{"Condition": c})
		if err != nil {
			t.Fatal(err)
		}
		if !holds {
			return nil
		}
	}
	rv, err := tpl.Resolve(map[string]any(r), p, testPseudo)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for param, provider := range map[string]string{"TwilioAuthTokenParam": "twilio", "SmtpPasswordParam": "smtp", "HttpProviderTokenParam": "http"} {
		if p[param] != "" {
			secrets["arn:aws:ssm:us-east-1:123456789012:parameter"+p[param]] = provider + "/secret"
		}
	}
	functions := map[string]string{}
	for _, c := range RouteChannels {
		if a := p[c.Prefix+"LambdaArn"]; a != "" {
			functions[a] = c.Channel + "/lambda"
		}
	}
	var out []string
	pols, _ := mapOf(mapOf(rv)["Properties"])["Policies"].([]any)
	for _, pol := range pols {
		sts, _ := mapOf(mapOf(pol)["PolicyDocument"])["Statement"].([]any)
		for _, st := range sts {
			s := mapOf(st)
			if s["Effect"] != "Allow" {
				continue
			}
			res := strs(s["Resource"])
			for _, a := range strs(s["Action"]) {
				switch {
				case a == "sns:Publish" && fmt.Sprint(s["NotResource"]) == "arn:aws:sns:*:*:*" && len(res) == 0:
					out = append(out, "sms/sns")
				case a == "sns:Publish" && slices.Equal(res, []string{"arn:aws:sns:us-east-1:123456789012:endpoint/" + p["PushPlatformApplication"] + "/*"}):
					out = append(out, "push/sns")
				case a == "ses:SendEmail" && slices.Contains(res, "arn:aws:ses:us-east-1:123456789012:identity/"+p["SesFrom"]):
					out = append(out, "email/ses")
				case a == "lambda:InvokeFunction" && len(res) == 1 && functions[res[0]] != "":
					out = append(out, functions[res[0]])
				case a == "ssm:GetParameter" && len(res) > 0 && !slices.ContainsFunc(res, func(r string) bool { return secrets[r] == "" }):
					for _, r := range res {
						out = append(out, secrets[r])
					}
				case a == "ssm:GetParameter" && fmt.Sprint(res) == "[arn:aws:ssm:us-east-1:123456789012:parameter"+p["RedactKeyParam"]+"]":
				case a == "kms:Decrypt" && slices.Equal(res, []string{"arn:aws:kms:us-east-1:123456789012:key/*"}) &&
					mapOf(mapOf(s["Condition"])["StringEquals"])["kms:EncryptionContext:PARAMETER_ARN"] == "arn:aws:ssm:us-east-1:123456789012:parameter"+p["RedactKeyParam"]:
					// the address-token key's SSM parameter, every role's
				case a == "kms:Decrypt" && slices.Equal(res, []string{"arn:aws:kms:us-east-1:123456789012:key/*"}):
					out = append(out, "kms:Decrypt")
				case strings.HasPrefix(a, "logs:"), strings.HasPrefix(a, "dynamodb:"), strings.HasPrefix(a, "sqs:"),
					strings.HasPrefix(a, "xray:"), a == "secretsmanager:GetSecretValue":
				default:
					out = append(out, fmt.Sprintf("%s on %v", a, res))
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// wantGrants returns the labels (providerGrants) a sender or reconciler
// needs for the routes of p: each provider of each route, its secret when
// it has one, kms:Decrypt to read a secret.
func wantGrants(p Values) []string {
	var out []string
	for _, c := range RouteChannels {
		for _, pr := range providersOf(p[c.Param]) {
			switch pr {
			case "sns", "ses", "lambda":
				out = append(out, c.Channel+"/"+pr)
			default:
				out = append(out, pr+"/secret", "kms:Decrypt")
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestRouteGrants: in the CloudFormation template.full.yaml translates to,
// on every route of every channel (the others unconfigured or on routes
// of three), with every provider's settings and secrets given, the
// sender's and the reconciler's roles hold exactly the grants the routes'
// providers need (wantGrants: SNS publish for sns, SES send for ses, the
// secret of twilio, smtp and http, InvokeFunction on the channel's
// function for lambda) and nothing of a provider outside them; no other
// role holds a provider grant. A few routes are spelt out.
func TestRouteGrants(t *testing.T) {
	t.Parallel()
	tpl := translatedTemplate(t, "template.full.yaml")
	base := with(tpl.Deployable(), routeSettings)
	roles := []string{roleOf(t, tpl, "SenderFunction"), roleOf(t, tpl, "ReconcileWorkerFunction")}
	var others []string
	for name, r := range tpl.Resources {
		if r["Type"] == "AWS::IAM::Role" && !slices.Contains(roles, name) {
			others = append(others, name)
		}
	}
	if len(others) < 4 {
		t.Fatalf("roles of the other functions: %v", others)
	}
	none := map[string]string{"SmsProvider": "", "EmailProvider": "", "PushProvider": ""}
	check := func(name string, p Values, want []string) {
		if vs, err := tpl.Violations(p); err != nil || len(vs) > 0 {
			t.Fatalf("%s: the Rules reject the settings: %v %v", name, vs, err)
		}
		for _, role := range roles {
			if got := providerGrants(t, tpl, role, p); !slices.Equal(got, want) {
				t.Errorf("%s: %s may %v, want %v", name, role, got, want)
			}
		}
		for _, role := range others {
			for _, g := range providerGrants(t, tpl, role, p) {
				if strings.HasPrefix(g, "sns:") || strings.HasPrefix(g, "ses:") || strings.HasPrefix(g, "lambda:") || strings.Contains(g, "/") && !strings.HasSuffix(g, "/secret") {
					t.Errorf("%s: %s, no sender, may %s", name, role, g)
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		set  map[string]string
		want []string
	}{
		// SNS's SMS publish and the Twilio token, not the HTTP token nor
		// the SMTP password, though both are set.
		{"TwilioThenSns", map[string]string{"SmsProvider": "twilio,sns"}, []string{"kms:Decrypt", "sms/sns", "twilio/secret"}},
		// Neither SNS nor the Twilio token.
		{"Http", map[string]string{"SmsProvider": "http"}, []string{"http/secret", "kms:Decrypt"}},
		// InvokeFunction on SmsLambdaArn, qualified as given, and nothing else.
		{"Lambda", map[string]string{"SmsProvider": "lambda"}, []string{"sms/lambda"}},
		{"LambdaOnTwoChannels", map[string]string{"SmsProvider": "lambda,sns", "PushProvider": "sns,lambda"}, []string{"push/lambda", "push/sns", "sms/lambda", "sms/sns"}},
		{"SesThenSmtp", map[string]string{"EmailProvider": "ses,smtp"}, []string{"email/ses", "kms:Decrypt", "smtp/secret"}},
		{"Nothing", nil, nil},
	} {
		check(tc.name, with(with(base, none), tc.set), tc.want)
	}
	n := 0
	for _, rc := range routeCases() {
		p := with(base, rc.set)
		check(rc.name, p, wantGrants(p))
		n++
	}
	t.Logf("%d combinations of routes, on %v and %d other roles", n, roles, len(others))
}

// TestVariantRouteGrants: template.yaml and template.sar.yaml, translated,
// grant the sender and the reconciler what their providers need: SMS and
// push through SNS, email through SES, and nothing of a provider they
// cannot configure.
func TestVariantRouteGrants(t *testing.T) {
	t.Parallel()
	full, _ := setup(t)
	for _, name := range []string{"template.yaml", "template.sar.yaml"} {
		tpl := translatedTemplate(t, name)
		roles := []string{roleOf(t, tpl, "SenderFunction"), roleOf(t, tpl, "ReconcileWorkerFunction")}
		for _, sms := range tpl.Extremes("SmsProvider") {
			for _, email := range tpl.Extremes("EmailProvider") {
				// What the variant fixes is template.full.yaml's default.
				p := with(full.Deployable(), tpl.Deployable()).With("SmsProvider", sms).With("EmailProvider", email).
					With("SesFrom", "notify@shop.example").With("RedactKeyParam", "/sendonce/redact-key")
				for _, role := range roles {
					if got, want := providerGrants(t, tpl, role, p), wantGrants(p); !slices.Equal(got, want) {
						t.Errorf("%s: sms %q, email %q: %s may %v, want %v", name, sms, email, role, got, want)
					}
				}
			}
		}
	}
}

type noAWS struct{}

var errNoAWS = errors.New("no AWS here")

func (noAWS) Publish(context.Context, *sns.PublishInput, ...func(*sns.Options)) (*sns.PublishOutput, error) {
	return nil, errNoAWS
}

func (noAWS) SendEmail(context.Context, *sesv2.SendEmailInput, ...func(*sesv2.Options)) (*sesv2.SendEmailOutput, error) {
	return nil, errNoAWS
}

func (noAWS) Invoke(context.Context, *lambda.InvokeInput, ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	return nil, errNoAWS
}

// functionEnv returns fn's environment in tpl under parameter values p,
// as the registry reads it: what names a resource as a placeholder, and a
// secret's SSM parameter (SENDONCE_X_PARAM) as the secret itself
// (SENDONCE_X; nothing here reaches SSM).
func functionEnv(t *testing.T, tpl *Template, fn string, p Values) map[string]string {
	t.Helper()
	rv, err := tpl.Resolve(mapOf(mapOf(tpl.Resources[fn]["Properties"])["Environment"])["Variables"], p, testPseudo)
	if err != nil {
		t.Fatal(err)
	}
	placeholder := regexp.MustCompile(`\$\{([A-Za-z0-9.:]+)\}`)
	env := map[string]string{}
	for k, v := range mapOf(rv) {
		s, ok := v.(string)
		if !ok {
			s = strings.ToLower(refName(v) + getAttName(v)) // a resource: its name
		}
		s = placeholder.ReplaceAllStringFunc(s, func(m string) string { return strings.ToLower(m[2 : len(m)-1]) })
		if name, ok := strings.CutSuffix(k, "_PARAM"); ok && s != "" && k != "SENDONCE_REDACT_KEY_PARAM" {
			k, s = name, "secret"+strings.ReplaceAll(s, "/", "-")
		}
		env[k] = s
	}
	return env
}

// TestRouteEnvironment: the environment template.full.yaml gives the
// sender and the reconciler makes the provider registry (the code both
// run) build each channel's route as the parameter lists it, provider by
// provider, with no start-up error, for every route of every channel
// (the others unconfigured, or on routes of three); and an http channel
// may have a gateway of its own.
func TestRouteEnvironment(t *testing.T) {
	t.Parallel()
	tpl := translatedTemplate(t, "template.full.yaml")
	base := with(tpl.Deployable(), routeSettings)
	cases := routeCases()
	own := map[string]string{"SmsProvider": "http,sns", "EmailProvider": "http", "PushProvider": "sns,http",
		"HttpProviderUrl": "", "HttpProviderUrlSms": "https://sms.gateway.example", "HttpProviderUrlEmail": "https://email.gateway.example",
		"HttpProviderUrlPush": "https://push.gateway.example/v1"}
	cases = append(cases, routeCase{"GatewayPerChannel", own})
	for _, fn := range []string{"SenderFunction", "ReconcilerFunction", "ReconcileWorkerFunction"} {
		for _, rc := range cases {
			p := with(base, rc.set)
			if vs, err := tpl.Violations(p); err != nil || len(vs) > 0 {
				t.Fatalf("%s: the Rules reject the settings: %v %v", rc.name, vs, err)
			}
			env := functionEnv(t, tpl, fn, p)
			e := lambdaenv.New(func(k string) string { return env[k] })
			routes := registry.ReadRoutes(context.Background(), e, registry.Options{SNS: noAWS{}, SES: noAWS{}, Lambda: noAWS{}})
			if err := e.Err(); err != nil {
				t.Errorf("%s: %s: the registry refuses its environment: %v", fn, rc.name, err)
				continue
			}
			for _, c := range RouteChannels {
				var got []string
				for _, a := range routes[c.Channel] {
					got = append(got, a.Name())
				}
				if want := providersOf(p[c.Param]); !slices.Equal(got, want) {
					t.Errorf("%s: %s: the registry builds %s's route %v, want %v", fn, rc.name, c.Channel, got, want)
				}
			}
		}
	}
}

// TestLambdaArnParameters: each channel's function parameter takes a
// function's ARN, qualified or not, which the lambda provider accepts,
// and nothing else: not a bare name (an IAM grant needs the ARN) nor a
// wildcard (the grant is on exactly the function).
func TestLambdaArnParameters(t *testing.T) {
	t.Parallel()
	tpl, _ := setup(t)
	good := []string{
		"arn:aws:lambda:us-east-1:123456789012:function:sms-provider",
		"arn:aws:lambda:eu-west-1:123456789012:function:sms_provider:live",
		"arn:aws:lambda:us-east-1:123456789012:function:f:7",
		"arn:aws:lambda:us-east-1:123456789012:function:f:$LATEST",
		"arn:aws-us-gov:lambda:us-gov-west-1:123456789012:function:f",
		"arn:aws-cn:lambda:cn-north-1:123456789012:function:f:prod",
	}
	bad := []string{
		"sms-provider", "sms-provider:live",
		"arn:aws:lambda:us-east-1:123456789012:function:*",
		"arn:aws:lambda:us-east-1:123456789012:function:f:*",
		"arn:aws:lambda:us-east-1:123456789012:function:f*",
		"arn:aws:lambda:us-east-1:1234:function:f",
		"arn:aws:lambda:us-east-1:123456789012:layer:f",
		"arn:aws:sns:us-east-1:123456789012:f",
		"arn:aws:lambda:us-east-1:123456789012:function:f:live:1",
		" arn:aws:lambda:us-east-1:123456789012:function:f",
	}
	n := 0
	for _, c := range RouteChannels {
		if !slices.Contains(c.Providers, "lambda") {
			continue
		}
		n++
		name := c.Prefix + "LambdaArn"
		pat, _ := tpl.Parameters[name]["AllowedPattern"].(string)
		re, err := regexp.Compile(pat)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !re.MatchString("") || tpl.Defaults()[name] != "" {
			t.Errorf("%s: the default, empty, is not allowed or not the default", name)
		}
		for _, a := range good {
			if !re.MatchString(a) {
				t.Errorf("%s refuses %s", name, a)
			}
			if err := lambdaprovider.CheckFunction(a); err != nil {
				t.Errorf("%s: the lambda provider refuses %s: %v", name, a, err)
			}
		}
		for _, a := range bad {
			if re.MatchString(a) {
				t.Errorf("%s takes %q", name, a)
			}
		}
		for _, decl := range []string{"Idempotent", "Lookup"} {
			if got := tpl.Extremes(c.Prefix + "Lambda" + decl); !slices.Equal(got, []string{"true", "false"}) || tpl.Defaults()[c.Prefix+"Lambda"+decl] != "false" {
				t.Errorf("%sLambda%s takes %v, default %q; want true or false, default false", c.Prefix, decl, got, tpl.Defaults()[c.Prefix+"Lambda"+decl])
			}
		}
	}
	if n != 3 {
		t.Errorf("%d channels take lambda, want 3", n)
	}
}

// TestVariantsOfferEveryDeployableRoute: template.yaml and
// template.sar.yaml offer, of the routes template.full.yaml takes, every
// one they can deploy: offering any other is refused, because a Rule then
// rejects the settings they fix (a route's second provider has none).
func TestVariantsOfferEveryDeployableRoute(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	for path, v := range variants {
		for i, k := range v.Keep {
			c, ok := RouteChannelOf(k.Name)
			if !ok {
				continue
			}
			for _, val := range c.Values() {
				if slices.Contains(k.Values, val) {
					continue
				}
				w := v
				w.Keep = slices.Clone(v.Keep)
				w.Keep[i].Values = append(slices.Clone(k.Values), val)
				if _, err := w.Generate(src); err == nil || !strings.Contains(err.Error(), "rejects the variant's fixed values") {
					t.Errorf("%s offering %s=%q: Generate = %v, want a Rule refusing it", path, k.Name, val, err)
				}
			}
		}
	}
}

// TestFailoversAlarm: template.full.yaml alarms on the Failovers the code
// records (metrics.Failovers in the stack's metrics.StackNamespace), summed over channel,
// from and to, reaching a person when it fires and when it recovers
// (CheckAlarms), only where a route lists more than one provider; the
// variants, which offer no route, have none.
func TestFailoversAlarm(t *testing.T) {
	t.Parallel()
	if want := "SELECT SUM(" + metrics.Failovers + `) FROM "` + metrics.StackNamespace("${AWS::StackName}") + `"`; FailoversQuery != want {
		t.Errorf("FailoversQuery is %q, want %q", FailoversQuery, want)
	}
	cfn := translate(t, "template.full.yaml")
	alarm := mapOf(mapOf(cfn["Resources"])["FailoversAlarm"])
	p := mapOf(alarm["Properties"])
	if alarm["Condition"] != FailsOverCond || p["ComparisonOperator"] != "GreaterThanThreshold" || p["Threshold"] != 0.0 ||
		!slices.Equal(strs(p["OKActions"]), strs(AlarmTarget)) || !slices.Equal(strs(p["AlarmActions"]), strs(AlarmTarget)) {
		t.Errorf("FailoversAlarm: %v", alarm)
	}
	for _, name := range []string{"template.yaml", "template.sar.yaml"} {
		if mapOf(translate(t, name)["Resources"])["FailoversAlarm"] != nil {
			t.Errorf("%s, which offers no route, has a failover alarm", name)
		}
	}
	if errs := CheckAlarms(cfn, runbook(t)); len(errs) != 0 {
		t.Errorf("CheckAlarms: %v", errs)
	}
	if errs := CheckAlarms(cfn, strings.Replace(runbook(t), "\n## Failovers\n", "\n## Failing over\n", 1)); len(errs) != 1 {
		t.Errorf("CheckAlarms on a runbook without the Failovers section: %v, want FailoversAlarm's link reported", errs)
	}
	delete(alarm, "Condition")
	if errs := CheckAlarms(cfn, runbook(t)); len(errs) == 0 {
		t.Error("CheckAlarms misses a failover alarm without its Condition")
	}
	delete(mapOf(cfn["Resources"]), "FailoversAlarm")
	if errs := CheckAlarms(cfn, runbook(t)); len(errs) == 0 {
		t.Error("CheckAlarms misses a template with routes and no failover alarm")
	}
}
