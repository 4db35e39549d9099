package chaos

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/sendonce/sendonce/internal/ledger"
	"github.com/sendonce/sendonce/internal/localpipeline"
	"github.com/sendonce/sendonce/internal/templates"
	"github.com/sendonce/sendonce/notify"
)

// TemplateChange is a tenant's change of one stored template while its
// lane runs: new versions put one after the other as the lane's
// workload is enqueued, the last one needing a parameter that only the
// messages enqueued after it fell due carry (the producer was upgraded
// with it; the messages enqueued before lack it). Many of those are
// claimed but not yet sent when it is put: the provider throttles the
// lane (429 to every send) from shortly before the put to shortly after,
// so the messages then in the queue are claimed, released and sent again
// only once the version that cannot render them is live (as are rows
// uncertain, or held by a worker that died).
//
// What the verdict demands (lane.check): every message a provider took
// carries the text of the version its ledger row pins, rendered on its
// data, and only that text; a message is FAILED for its text only when
// its row holds no message at all (its first claim came after a version
// it cannot render was live, so nothing was ever sent). A message claimed
// before the change is sent once, with the pinned version's text, however
// many takeovers, releases and resends it goes through after it.
type TemplateChange struct {
	// Template and Channel name the template (of the lane's tenant, which
	// holds the example templates as version 1).
	Template, Channel string
	// Versions are put in order, each once the share At of the lane's
	// first wave has been enqueued: version 2, 3, ...
	Versions []TemplateVersion
	// Param is the parameter the producer adds, with one of ParamValues,
	// to the messages enqueued from ParamLead messages after the last
	// version fell due on (paramFrom).
	Param       string
	ParamLead   int
	ParamValues []string
	// Throttle, when set, is how long the provider refuses every send of
	// the lane (429) once the last version falls due, and ThrottleLead
	// how long into that the version is put.
	Throttle, ThrottleLead time.Duration
	// CacheTTL becomes the lane's SENDONCE_TEMPLATE_CACHE, so that every
	// sender instance uses a new version soon after it is put (0: the
	// default, a minute).
	CacheTTL time.Duration
}

// TemplateVersion is one version a TemplateChange puts.
type TemplateVersion struct {
	// At is the share of the lane's first wave enqueued before the
	// version falls due.
	At float64
	// Text is the version's text (sms).
	Text string
}

// orderShippedChange is the twilio lane's change: version 2 rewords the
// shipping SMS (it renders every message's data); version 3 names the
// carrier, which the messages enqueued before the producer was upgraded
// lack, so it cannot render them.
var orderShippedChange = &TemplateChange{
	Template: "order_shipped", Channel: "sms",
	Versions: []TemplateVersion{
		{At: 0.2, Text: `Order {{.order_id}} is on its way.{{with index . "tracking_url"}} Track it: {{.}}{{end}}`},
		{At: 0.5, Text: `Order {{.order_id}} is on its way with {{.carrier}}.`},
	},
	Param: "carrier", ParamLead: 10, ParamValues: []string{"UPS", "DHL", "FedEx"},
	Throttle: 20 * time.Second, ThrottleLead: 10 * time.Second,
	CacheTTL: 5 * time.Second,
}

// paramFrom is the index (in feed order) of the first of n messages that
// carries c.Param: ParamLead after the last version falls due.
func (c *TemplateChange) paramFrom(n int) int {
	last := c.Versions[len(c.Versions)-1].At
	return min(n, int(last*float64(n))+c.ParamLead)
}

// addParam gives the messages of c's template from c.paramFrom on the
// parameter c.Param (the upgraded producer).
func (c *TemplateChange) addParam(w localpipeline.Workload, rng *rand.Rand) localpipeline.Workload {
	from := c.paramFrom(len(w.Messages))
	return rewrite(w, func(i int, r *notify.Request) bool {
		if i < from || r.Template != c.Template || string(r.Channel) != c.Channel || r.Content != nil {
			return false
		}
		if r.Data == nil {
			r.Data = map[string]any{}
		}
		r.Data[c.Param] = c.ParamValues[rng.IntN(len(c.ParamValues))]
		return true
	})
}

// rewrite applies f to the request of each valid message of w (by
// index); where f reports a change, the message's body, key, class and
// address are made again from the request, and every copy of its body in
// w.First is replaced.
func rewrite(w localpipeline.Workload, f func(i int, r *notify.Request) bool) localpipeline.Workload {
	renamed := map[string]string{}
	msgs := make([]localpipeline.Message, len(w.Messages))
	copy(msgs, w.Messages)
	for i, m := range msgs {
		if !m.Valid {
			continue
		}
		var r notify.Request
		if err := json.Unmarshal([]byte(m.Body), &r); err != nil {
			continue // a valid message's body is a request
		}
		if !f(i, &r) {
			continue
		}
		body, _ := json.Marshal(r)
		renamed[m.Body] = string(body)
		m.Body, m.Key, m.Class, m.Address, m.Channel = string(body), r.Key(), string(r.Class), r.Address(), string(r.Channel)
		msgs[i] = m
	}
	out := localpipeline.Workload{Messages: msgs}
	for _, b := range w.First {
		out.First = append(out.First, cmp.Or(renamed[b], b))
	}
	return out
}

// templateRun is a TemplateChange as a run carries it out.
type templateRun struct {
	c      *TemplateChange
	tenant string
	store  templates.Store
	// since is when the fault phase started (Run sets it before feeding).
	since time.Time

	mu  sync.Mutex
	put []putVersion // in order
	err error
	// throttled is when the throttle began (zero: not yet); unthrottled
	// is set once it ended.
	throttled   time.Time
	unthrottled bool
}

// putVersion is a version put during the run.
type putVersion struct {
	Version int
	// At is when it was put; Fed the share of the lane's first wave
	// enqueued by then.
	At  time.Time
	Fed float64
}

func newTemplateRun(c *TemplateChange, tenant string, store templates.Store) *templateRun {
	return &templateRun{c: c, tenant: tenant, store: store}
}

// step carries the change on at now, once the share fed of the lane's
// first wave was enqueued: it puts each version that is due; for the
// last one, with c.Throttle set and a throttle to call, it first turns
// the throttle on, puts the version c.ThrottleLead later, and turns the
// throttle off c.Throttle after it began. It returns a line per event.
func (t *templateRun) step(ctx context.Context, fed float64, now time.Time, throttle func(on bool)) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var lines []string
	for t.err == nil && len(t.put) < len(t.c.Versions) {
		v := t.c.Versions[len(t.put)]
		if fed < v.At && t.throttled.IsZero() {
			break
		}
		if len(t.put) == len(t.c.Versions)-1 && t.c.Throttle > 0 && throttle != nil {
			if t.throttled.IsZero() {
				t.throttled = now
				throttle(true)
				lines = append(lines, fmt.Sprintf("provider throttled (429 to every send) for %s around the put of the last version", t.c.Throttle))
			}
			if now.Before(t.throttled.Add(t.c.ThrottleLead)) {
				break
			}
		}
		got, err := t.store.Put(ctx, templates.Template{ID: t.id(), Text: v.Text})
		if err != nil {
			t.err = fmt.Errorf("chaos: put template %s: %w", t.id(), err)
			lines = append(lines, t.err.Error())
			break
		}
		t.put = append(t.put, putVersion{Version: got.Version, At: now, Fed: fed})
		lines = append(lines, fmt.Sprintf("template %s: version %d put (%.0f%% of the lane's first wave enqueued)", t.id(), got.Version, 100*fed))
	}
	if !t.throttled.IsZero() && !t.unthrottled && (!now.Before(t.throttled.Add(t.c.Throttle)) || t.err != nil) {
		t.unthrottled = true
		throttle(false)
		lines = append(lines, "provider throttle over")
	}
	return lines
}

func (t *templateRun) id() templates.ID {
	return templates.ID{Tenant: t.tenant, Name: t.c.Template, Channel: t.c.Channel}
}

// Put returns the versions put so far, and the error that stopped the
// change, if any.
func (t *templateRun) Put() ([]putVersion, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]putVersion(nil), t.put...), t.err
}

// texts returns, per version of r's template that can render r (1, the
// example, and those put), the text it renders; a version that cannot
// render r is absent. Only sms texts are compared.
func (t *templateRun) texts(r notify.Request) map[int]string {
	out := map[int]string{}
	if r.Content != nil {
		return out
	}
	examples, _ := templates.Examples(r.TenantID)
	for _, e := range examples {
		if e.Name == r.Template && e.Channel == string(r.Channel) && e.Locale == "" {
			if s, ok := renderText(e, r.Data); ok {
				out[1] = s
			}
		}
	}
	if t == nil || r.Template != t.c.Template || string(r.Channel) != t.c.Channel {
		return out
	}
	put, _ := t.Put()
	for i, p := range put {
		if s, ok := renderText(templates.Template{ID: t.id(), Text: t.c.Versions[i].Text}, r.Data); ok {
			out[p.Version] = s
		}
	}
	return out
}

func renderText(t templates.Template, data map[string]any) (string, bool) {
	c, err := templates.Compile(t)
	if err != nil {
		return "", false
	}
	_, text, _, err := c.Execute(data)
	return text, err == nil
}

// holdsNoMessage reports whether r's row holds neither content nor a
// template version: its request could not be rendered when it was first
// claimed, so no attempt of it can have reached a provider.
func holdsNoMessage(r ledger.Record) bool {
	return r.TemplateVersion == 0 && r.Subject == "" && r.Body == "" && r.HTML == ""
}

// request is a valid message's request.
func request(m localpipeline.Message) notify.Request {
	var r notify.Request
	_ = json.Unmarshal([]byte(m.Body), &r) // a valid message's body is a request
	return r
}

// unrenderable returns "" when m, a FAILED message no provider rejected,
// failed for its text as it may: its row holds no message, and a version
// of its template put during the run cannot render its data. Otherwise it
// says why the failure is unjustified.
func (l *lane) unrenderable(m localpipeline.Message, rec ledger.Record) string {
	if !holdsNoMessage(rec) {
		return fmt.Sprintf("its row pins template version %d, which rendered it when it was first claimed", rec.TemplateVersion)
	}
	r := request(m)
	versions := 1
	if l.tc != nil && r.Template == l.tc.c.Template && string(r.Channel) == l.tc.c.Channel {
		put, _ := l.tc.Put()
		versions += len(put)
	}
	if len(l.tc.texts(r)) >= versions {
		return "every version of its template renders its data"
	}
	return ""
}

// templateReport returns the lane's template change as the verdict
// fills it in (nil: the lane has none).
func (l *lane) templateReport() *TemplateReport {
	if l.tc == nil {
		return nil
	}
	tr := &TemplateReport{Template: l.tc.id().String(), Versions: []VersionCount{{Version: 1}}}
	put, _ := l.tc.Put()
	for _, p := range put {
		tr.Versions = append(tr.Versions, VersionCount{Version: p.Version, Fed: p.Fed, At: p.At.Sub(l.tc.since)})
	}
	return tr
}

// checkTexts checks what the provider took for m (its accepted messages)
// against the version its row rec pins: every message carries that
// version's text rendered on m's data, and only that text. It counts the
// changed template's rows and messages per version in tr.
func (l *lane) checkTexts(m localpipeline.Message, rec ledger.Record, accepted []acceptedMessage, tr *TemplateReport, add func(Violation)) {
	bodies := make([]string, len(accepted))
	for i, a := range accepted {
		bodies[i] = a.Body
	}
	r := request(m)
	changed := tr != nil && r.Template == l.tc.c.Template && string(r.Channel) == l.tc.c.Channel
	version := func(v int) *VersionCount {
		for i := range tr.Versions {
			if tr.Versions[i].Version == v {
				return &tr.Versions[i]
			}
		}
		return nil
	}
	if changed && rec.TemplateVersion > 0 {
		if vc := version(rec.TemplateVersion); vc != nil {
			vc.Pinned++
		}
	}
	if r.Content != nil {
		if len(slices.Compact(slices.Sorted(slices.Values(bodies)))) > 1 {
			add(Violation{Kind: "sent with two texts", Key: m.Key, Detail: fmt.Sprintf("%d different texts", len(bodies))})
		}
		return
	}
	texts := l.tc.texts(r)
	// When the last version was live everywhere (zero: not put).
	var live time.Time
	lastVersion := 0
	if changed {
		if put, _ := l.tc.Put(); len(put) == len(l.tc.c.Versions) {
			last := put[len(put)-1]
			// Providers stamp whole seconds.
			live, lastVersion = last.At.Add(l.tc.c.CacheTTL+time.Second), last.Version
		}
	}
	seen := map[string]bool{}
	for i, b := range bodies {
		seen[b] = true
		v := 0
		if texts[rec.TemplateVersion] == b {
			v = rec.TemplateVersion
		} else {
			for _, k := range slices.Sorted(maps.Keys(texts)) {
				if texts[k] == b {
					v = k
					break
				}
			}
		}
		if changed {
			if vc := version(v); vc != nil {
				vc.Received++
			} else {
				tr.Other++
			}
			if _, renders := texts[lastVersion]; lastVersion > 0 && !renders && v == rec.TemplateVersion && !accepted[i].At.Before(live) {
				tr.Straddled++
			}
		}
		switch {
		case v == 0:
			add(Violation{Kind: "sent with a text no version renders", Key: m.Key,
				Detail: fmt.Sprintf("%s %s: the provider took %q; its row pins version %d", m.Channel, r.Template, b, rec.TemplateVersion)})
		case v != rec.TemplateVersion:
			add(Violation{Kind: "sent with a version it does not pin", Key: m.Key,
				Detail: fmt.Sprintf("%s %s: the provider took version %d's text %q; its row pins version %d", m.Channel, r.Template, v, b, rec.TemplateVersion)})
		}
	}
	if len(seen) > 1 {
		add(Violation{Kind: "sent with two texts", Key: m.Key, Detail: fmt.Sprintf("%s %s: %d different texts", m.Channel, r.Template, len(seen))})
	}
}
