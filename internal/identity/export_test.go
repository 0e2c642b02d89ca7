package identity

// CacheKeys are the keys a cache holds, for tests that check what they are made of.
func CacheKeys(c *Cache) []string {
	var out []string
	for _, k := range append(c.entries.Keys(), c.negatives.Keys()...) {
		out = append(out, k.(string))
	}
	return out
}

// ThrottleKeys is how many keys a throttle remembers.
func ThrottleKeys(t *Throttle) int { return len(t.entries.Keys()) }

// HoldTokenVerifications takes every token verification slot of p, as a flood of made-up
// tokens would, until release.
func HoldTokenVerifications(p *UsersFile) (release func()) {
	for range cap(p.tokenSlots) {
		p.tokenSlots <- struct{}{}
	}
	return func() {
		for range cap(p.tokenSlots) {
			<-p.tokenSlots
		}
	}
}
