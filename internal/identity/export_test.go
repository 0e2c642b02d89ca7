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
