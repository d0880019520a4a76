package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// APIVersion is one API key's advertised range; Min and Max are -1 when
// the key is not advertised.
type APIVersion struct {
	Key      int16
	Name     string
	Min, Max int16
	Note     string
}

// Advertised reports whether the key has a range.
func (v APIVersion) Advertised() bool { return v.Max >= 0 }

// Range formats the range as "min-max", or "-".
func (v APIVersion) Range() string {
	if !v.Advertised() {
		return "-"
	}
	if v.Min == v.Max {
		return strconv.Itoa(int(v.Min))
	}
	return fmt.Sprintf("%d-%d", v.Min, v.Max)
}

// ReadVersions reads a versions table: tab-separated key, name, min, max
// and an optional note, with "-" for a key not advertised and # comments.
func ReadVersions(r io.Reader) ([]APIVersion, error) {
	var out []APIVersion
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 4 {
			return nil, fmt.Errorf("versions line %d: %d fields, want at least 4", n, len(f))
		}
		key, err := strconv.ParseInt(f[0], 10, 16)
		if err != nil {
			return nil, fmt.Errorf("versions line %d: key: %w", n, err)
		}
		v := APIVersion{Key: int16(key), Name: f[1], Min: -1, Max: -1}
		if f[2] != "-" || f[3] != "-" {
			lo, err1 := strconv.ParseInt(f[2], 10, 16)
			hi, err2 := strconv.ParseInt(f[3], 10, 16)
			if err1 != nil || err2 != nil || lo < 0 || lo > hi {
				return nil, fmt.Errorf("versions line %d: bad range %q-%q", n, f[2], f[3])
			}
			v.Min, v.Max = int16(lo), int16(hi)
		}
		if len(f) > 4 {
			v.Note = f[4]
		}
		out = append(out, v)
	}
	return out, sc.Err()
}

// ReadVersionsFile reads a versions table from path.
func ReadVersionsFile(path string) ([]APIVersion, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read versions: %w", err)
	}
	defer f.Close()
	vs, err := ReadVersions(f)
	if err != nil {
		return nil, fmt.Errorf("read versions %s: %w", path, err)
	}
	return vs, nil
}

// WriteVersionsFile writes vs in the format ReadVersions reads.
func WriteVersionsFile(path, header string, vs []APIVersion) error {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		fmt.Fprintf(&b, "# %s\n", line)
	}
	for _, v := range vs {
		lo, hi := "-", "-"
		if v.Advertised() {
			lo, hi = strconv.Itoa(int(v.Min)), strconv.Itoa(int(v.Max))
		}
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s\t%s\n", v.Key, v.Name, lo, hi, v.Note)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write versions: %w", err)
	}
	return nil
}

// QueryVersions asks the broker at addr for its ApiVersions and returns
// the advertised keys in key order.
func QueryVersions(ctx context.Context, addr string) ([]APIVersion, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, fmt.Errorf("api versions: %w", err)
	}
	defer cl.Close()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName = "gregor-compat"
	req.ClientSoftwareVersion = "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("api versions from %s: %w", addr, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("api versions from %s: %w", addr, err)
	}
	var out []APIVersion
	for _, k := range resp.ApiKeys {
		out = append(out, APIVersion{Key: k.ApiKey, Name: kmsg.NameForKey(k.ApiKey), Min: k.MinVersion, Max: k.MaxVersion})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}
