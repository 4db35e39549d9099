package infra

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestRouteBlocks: template.full.yaml's channel parameters' AllowedValues
// and its route Conditions and Rules are the ones RouteBlocks works out
// from RouteChannels (make template rewrites them after a change).
func TestRouteBlocks(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	blocks := RouteBlocks()
	for _, name := range slices.Sorted(maps.Keys(blocks)) {
		if *update {
			if text, err = ReplaceBlock(text, name, blocks[name]); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := Block(text, name); got != blocks[name] {
			t.Errorf("%s's generated %s is not what RouteBlocks gives: run make template", templatePath, name)
		}
	}
	if *update {
		if err := os.WriteFile(templatePath, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// routeSettings are settings for every provider of every route, so that
// the Rules accept any route with them.
var routeSettings = Values{
	"TwilioAccountSid":       "AC0123456789abcdef0123456789abcdef",
	"TwilioAuthTokenParam":   "/sendonce/twilio-token",
	"TwilioFrom":             "+15550001111",
	"SmtpHost":               "smtp.shop.example",
	"SmtpFrom":               "notify@shop.example",
	"SmtpUsername":           "mailer",
	"SmtpPasswordParam":      "/sendonce/smtp-password",
	"SesFrom":                "notify@shop.example",
	"HttpProviderUrl":        "https://gateway.shop.example",
	"HttpProviderTokenParam": "/sendonce/http-token",
	"SmsLambdaArn":           "arn:aws:lambda:us-east-1:123456789012:function:sms-provider:live",
	"EmailLambdaArn":         "arn:aws:lambda:us-east-1:123456789012:function:email-provider",
	"PushLambdaArn":          "arn:aws:lambda:us-east-1:123456789012:function:push-provider:7",
}

// busyRoutes give every channel a route of three providers, among them
// the ones whose settings or grants the channels share or keep apart
// (http, lambda).
var busyRoutes = map[string]string{"SmsProvider": "twilio,http,lambda", "EmailProvider": "smtp,lambda,ses", "PushProvider": "http,lambda,sns"}

var testPseudo = Pseudo{"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012",
	"AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "sendonce"}

// routeCase is one channel's route with the others none or busy.
type routeCase struct {
	name string
	set  map[string]string // channel parameter → route
}

// routeCases returns every value of every channel's parameter, once with
// the other channels unconfigured and once with them on busyRoutes.
func routeCases() []routeCase {
	var out []routeCase
	for _, c := range RouteChannels {
		for _, v := range c.Values() {
			for _, busy := range []bool{false, true} {
				set := map[string]string{}
				for _, d := range RouteChannels {
					set[d.Param] = ""
					if busy {
						set[d.Param] = busyRoutes[d.Param]
					}
				}
				set[c.Param] = v
				out = append(out, routeCase{fmt.Sprintf("%s=%q/busy=%t", c.Param, v, busy), set})
			}
		}
	}
	return out
}

func with(p Values, set map[string]string) Values {
	for k, v := range set {
		p = p.With(k, v)
	}
	return p
}

// providersOf returns the providers of a route, in order.
func providersOf(route string) []string {
	if route == "" {
		return nil
	}
	return strings.Split(route, ",")
}

// TestRouteValues: each channel parameter of template.full.yaml takes
// (its AllowedPattern matches, of every list of up to four providers and
// a few malformed ones) exactly "" and every route of 1 to MaxRouteLength
// distinct providers of the channel; the registry, reading the
// environment the template gives the sender, accepts every one of them
// (TestRouteEnvironment).
func TestRouteValues(t *testing.T) {
	t.Parallel()
	tpl, _ := setup(t)
	// Every list of up to four of the providers any channel has, each
	// provider any number of times, and a few malformed lists.
	names := []string{"http", "lambda", "ses", "smtp", "sns", "twilio"}
	candidates := []string{"", ",", ",sns", "sns,", "sns,,http", "SNS", " sns", "sns ,http", "sns;http", "email"}
	var grow func(prefix []string)
	grow = func(prefix []string) {
		if len(prefix) > 0 {
			candidates = append(candidates, strings.Join(prefix, ","))
		}
		if len(prefix) < 4 {
			for _, n := range names {
				grow(append(slices.Clip(prefix), n))
			}
		}
	}
	grow(nil)
	for _, c := range RouteChannels {
		pat, _ := tpl.Parameters[c.Param]["AllowedPattern"].(string)
		if _, ok := tpl.Parameters[c.Param]["AllowedValues"]; ok || pat != c.Pattern() {
			t.Errorf("%s's AllowedPattern is %q (AllowedValues %v), want %q", c.Param, pat, tpl.Parameters[c.Param]["AllowedValues"], c.Pattern())
		}
		re, err := regexp.Compile(pat)
		if err != nil {
			t.Fatalf("%s: %v", c.Param, err)
		}
		var got []string
		for _, v := range candidates {
			if re.MatchString(v) {
				got = append(got, v)
			}
		}
		want := slices.Clone(c.Values())
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s takes %q, want %q", c.Param, got, want)
		}
		if d := tpl.Defaults()[c.Param]; !re.MatchString(d) {
			t.Errorf("%s's default %q is not one of its values", c.Param, d)
		}
		count := 0 // the permutations of 1 to MaxRouteLength of the providers
		for k := 1; k <= min(MaxRouteLength, len(c.Providers)); k++ {
			n := 1
			for i := range k {
				n *= len(c.Providers) - i
			}
			count += n
		}
		seen := map[string]bool{}
		for _, r := range c.Routes() {
			ps := providersOf(r)
			if len(ps) == 0 || len(ps) > MaxRouteLength || seen[r] {
				t.Errorf("%s: route %q", c.Param, r)
			}
			seen[r] = true
			for i, p := range ps {
				if !slices.Contains(c.Providers, p) || slices.Contains(ps[:i], p) {
					t.Errorf("%s: route %q names %s twice or for a channel it cannot serve", c.Param, r, p)
				}
			}
		}
		if len(seen) != count {
			t.Errorf("%s: %d routes, want %d", c.Param, len(seen), count)
		}
	}
	if _, ok := RouteChannelOf("EmailProvider"); !ok {
		t.Error("RouteChannelOf(EmailProvider) finds nothing")
	}
	email, _ := RouteChannelOf("EmailProvider")
	if slices.Contains(email.Providers, "sns") {
		t.Error("email through sns needs a topic the templates do not configure")
	}
}

// routeConditionErrors returns what is wrong with tpl's route Conditions
// on every route of every channel (the other channels unconfigured, or
// on routes of three), without the providers' settings and with them:
// each must hold exactly when its route includes its provider
// (<Channel>Via<Provider>), lists more than one (<Channel>FailsOver), or
// includes lambda and the channel's function is set
// (<Channel>InvokesFunction); UsesHttp when some route includes http,
// FailsOver when some route lists more than one provider; and tpl must
// have no other such Condition.
func routeConditionErrors(tpl *Template) []string {
	want := map[string]func(Values) bool{}
	for _, c := range RouteChannels {
		for _, pr := range c.Providers {
			want[c.Cond(pr)] = func(q Values) bool { return slices.Contains(providersOf(q[c.Param]), pr) }
		}
		want[c.FailsOverCond()] = func(q Values) bool { return len(providersOf(q[c.Param])) > 1 }
		if slices.Contains(c.Providers, "lambda") {
			want[c.InvokesCond()] = func(q Values) bool {
				return slices.Contains(providersOf(q[c.Param]), "lambda") && q[c.Prefix+"LambdaArn"] != ""
			}
		}
	}
	want[UsesHttpCond] = func(q Values) bool {
		return slices.ContainsFunc(RouteChannels, func(c RouteChannel) bool { return slices.Contains(providersOf(q[c.Param]), "http") })
	}
	want[FailsOverCond] = func(q Values) bool {
		return slices.ContainsFunc(RouteChannels, func(c RouteChannel) bool { return len(providersOf(q[c.Param])) > 1 })
	}
	var errs []string
	for name := range tpl.Conditions {
		if _, ok := want[name]; !ok && (strings.Contains(name, "Via") || strings.HasSuffix(name, "FailsOver") || strings.HasSuffix(name, "InvokesFunction")) {
			errs = append(errs, fmt.Sprintf("Condition %s is not a route Condition of RouteChannels", name))
		}
	}
	// Each route with the providers' settings at their defaults (none),
	// and with every one given.
	for _, base := range []Values{tpl.Deployable(), with(tpl.Deployable(), routeSettings)} {
		for _, rc := range routeCases() {
			q := with(base, rc.set)
			e := &eval{t: tpl, p: q}
			for _, name := range slices.Sorted(maps.Keys(want)) {
				got, err := e.cond(map[string]any{"Condition": name})
				if err != nil {
					return append(errs, fmt.Sprintf("%s: %s: %v", rc.name, name, err))
				}
				if got != want[name](q) {
					errs = append(errs, fmt.Sprintf("%s (ARNs %q): Condition %s is %t", rc.name, q["SmsLambdaArn"], name, got))
				}
			}
		}
	}
	return errs
}

// needs returns the Rules that reject a route whose providers have none
// of their settings: each provider's own.
func needs(c RouteChannel, route string) []string {
	var out []string
	for _, p := range providersOf(route) {
		switch p {
		case "http":
			out = append(out, "HttpProviderConfigured", c.Prefix+"HttpConfigured")
		case "lambda":
			out = append(out, c.Prefix+"LambdaConfigured")
		case "twilio":
			out = append(out, "TwilioConfigured")
		case "smtp":
			out = append(out, "SmtpConfigured")
		case "ses":
			out = append(out, "SesConfigured")
		}
	}
	slices.Sort(out)
	return out
}

// routeRuleErrors returns what is wrong with tpl's Rules on every route
// of every channel: without the settings of its providers, exactly the
// Rules of those providers must reject it (Twilio's account, SMTP's host,
// SES's sender, the HTTP gateway's URL and token, the channel's
// function); with them, none.
func routeRuleErrors(tpl *Template) []string {
	p := tpl.Deployable()
	var errs []string
	for _, c := range RouteChannels {
		for _, v := range c.Values() {
			set := map[string]string{"SmsProvider": "", "EmailProvider": "", "PushProvider": ""}
			set[c.Param] = v
			vs, err := tpl.Violations(with(p, set))
			if err != nil {
				return append(errs, err.Error())
			}
			if want := needs(c, v); !slices.Equal(vs, want) {
				errs = append(errs, fmt.Sprintf("%s=%q without settings: rules reject %v, want %v", c.Param, v, vs, want))
			}
			if vs, err = tpl.Violations(with(with(p, routeSettings), set)); err != nil || len(vs) > 0 {
				errs = append(errs, fmt.Sprintf("%s=%q with every setting: rules reject %v (%v)", c.Param, v, vs, err))
			}
		}
	}
	return errs
}

// TestRouteConditionsAndRules: template.full.yaml's route Conditions and
// Rules mean what they say on every route (routeConditionErrors,
// routeRuleErrors).
func TestRouteConditionsAndRules(t *testing.T) {
	t.Parallel()
	tpl, _ := setup(t)
	for _, err := range routeConditionErrors(tpl) {
		t.Error(err)
	}
	for _, err := range routeRuleErrors(tpl) {
		t.Error(err)
	}
}

// TestRouteChecksCatchBreakage: a route missing from a Condition's list,
// a Condition of a provider no route has, a Rule gone or one that tests
// the wrong list are reported.
func TestRouteChecksCatchBreakage(t *testing.T) {
	t.Parallel()
	firstOr := func(tpl *Template, cond string) map[string]any {
		return mapOf(mapOf(tpl.Conditions[cond])["Fn::Or"].([]any)[0])
	}
	for name, tc := range map[string]struct {
		breakIt func(*Template)
		check   func(*Template) []string
	}{
		"RouteLeftOutOfCondition": {func(tpl *Template) {
			inner := firstOr(tpl, "SmsViaTwilio")
			inner["Fn::Or"] = inner["Fn::Or"].([]any)[1:] // "twilio" alone
		}, routeConditionErrors},
		"StaleCondition": {func(tpl *Template) {
			tpl.Conditions["EmailViaSns"] = map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "EmailProvider"}, "sns"}}
		}, routeConditionErrors},
		"FailsOverOnOneChannel": {func(tpl *Template) {
			tpl.Conditions["FailsOver"] = map[string]any{"Condition": "SmsFailsOver"}
		}, routeConditionErrors},
		"InvokesWithoutTheRoute": {func(tpl *Template) {
			tpl.Conditions["PushInvokesFunction"] = map[string]any{"Fn::Not": []any{map[string]any{"Fn::Equals": []any{map[string]any{"Ref": "PushLambdaArn"}, ""}}}}
		}, routeConditionErrors},
		"RuleGone": {func(tpl *Template) { delete(tpl.Rules, "PushLambdaConfigured") }, routeRuleErrors},
		"RuleOnWrongChannel": {func(tpl *Template) {
			tpl.Rules["EmailHttpConfigured"] = tpl.Rules["SmsHttpConfigured"]
		}, routeRuleErrors},
		"TokenNotRequired": {func(tpl *Template) {
			delete(tpl.Rules, "HttpProviderConfigured")
		}, routeRuleErrors},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tpl, _ := setup(t)
			tc.breakIt(tpl)
			if errs := tc.check(tpl); len(errs) == 0 {
				t.Error("reports nothing")
			}
		})
	}
}
