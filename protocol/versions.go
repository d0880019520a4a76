package protocol

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// VersionRange is the range of versions served for one API key.
type VersionRange struct {
	Min, Max int16
}

// Versions is the table of API keys the broker serves. Handlers register
// their ranges once at start-up; ApiVersions and the per-request version
// check both read this one table, so what is advertised is what is served.
type Versions struct {
	ranges [kmsg.MaxKey + 1]VersionRange
	served [kmsg.MaxKey + 1]bool
}

// Register records that key is served for versions min to max. It panics
// on a programming error: a key registered twice or a range kmsg cannot
// decode.
func (v *Versions) Register(key, min, max int16) {
	if key < 0 || int(key) > kmsg.MaxKey || v.served[key] {
		panic(fmt.Sprintf("protocol: bad or duplicate registration of key %d", key))
	}
	req := kmsg.RequestForKey(key)
	if req == nil || max > req.MaxVersion() || min > max || min < 0 {
		panic(fmt.Sprintf("protocol: key %d range %d-%d is not decodable", key, min, max))
	}
	v.ranges[key] = VersionRange{min, max}
	v.served[key] = true
}

// Lookup returns the range served for key, and whether key is served.
func (v *Versions) Lookup(key int16) (VersionRange, bool) {
	if key < 0 || int(key) > kmsg.MaxKey || !v.served[key] {
		return VersionRange{}, false
	}
	return v.ranges[key], true
}

// Supports reports whether key is served at version.
func (v *Versions) Supports(key, version int16) bool {
	r, ok := v.Lookup(key)
	return ok && version >= r.Min && version <= r.Max
}

// Keys returns the ApiVersions entries for every served key, in key order.
func (v *Versions) Keys() []kmsg.ApiVersionsResponseApiKey {
	var out []kmsg.ApiVersionsResponseApiKey
	for k := range v.ranges {
		if !v.served[k] {
			continue
		}
		e := kmsg.NewApiVersionsResponseApiKey()
		e.ApiKey = int16(k)
		e.MinVersion = v.ranges[k].Min
		e.MaxVersion = v.ranges[k].Max
		out = append(out, e)
	}
	return out
}
