package opstate

import (
	"context"
	"maps"
	"sync"
	"time"
)

// Memory is the providers' item (ProvidersKey) in memory, for the
// simulator and unit tests: ProviderState and Providers as Store's, which
// TestProvidersConformance checks against DynamoDB Local with the same
// cases. It keeps Unix seconds, as the item does. The zero Memory is
// empty and ready; it is safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	states map[string]time.Time // state + "#" + provider → until
}

// ProviderState records that provider is in state until until, to the
// second; a later until never shortens an earlier one.
func (m *Memory) ProviderState(_ context.Context, provider, state string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states == nil {
		m.states = map[string]time.Time{}
	}
	a, u := state+"#"+provider, time.Unix(until.Unix(), 0).UTC()
	if u.After(m.states[a]) {
		m.states[a] = u
	}
	return nil
}

// Providers returns each provider's down and up states, whether or not
// they have passed, as Store.Providers does.
func (m *Memory) Providers(context.Context) (map[string]Provider, error) {
	m.mu.Lock()
	states := maps.Clone(m.states)
	m.mu.Unlock()
	ps := map[string]Provider{}
	for a, u := range states {
		state, provider, _ := cutState(a)
		p := ps[provider]
		switch state {
		case Down:
			p.DownUntil = u
		case Up:
			p.UpAt = u
		default:
			continue
		}
		ps[provider] = p
	}
	return ps, nil
}
