//go:build pmix

package pmix

// tagged: this test binary links libpmix (tag pmix).
const tagged = true
