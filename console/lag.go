package console

import "sync"

// sample is a group's total lag at a time (Unix milliseconds).
type sample struct {
	T   int64 `json:"t"`
	Lag int64 `json:"lag"`
}

// lagHistory keeps each group's recent lag samples in a ring of fixed
// size, for at most maxGroups groups: memory stays bounded however long
// the console runs and however many groups come and go.
type lagHistory struct {
	mu        sync.Mutex // guards groups
	size      int
	maxGroups int
	groups    map[string]*ring
}

type ring struct {
	buf  []sample
	next int // where the next sample goes
	full bool
}

func newLagHistory(size, maxGroups int) *lagHistory {
	return &lagHistory{size: size, maxGroups: maxGroups, groups: make(map[string]*ring)}
}

func (h *lagHistory) add(group string, s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.groups[group]
	if r == nil {
		if len(h.groups) >= h.maxGroups {
			return
		}
		r = &ring{buf: make([]sample, h.size)}
		h.groups[group] = r
	}
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// history is a group's samples, oldest first.
func (h *lagHistory) history(group string) []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := []sample{}
	r := h.groups[group]
	if r == nil {
		return out
	}
	if r.full {
		out = append(out, r.buf[r.next:]...)
	}
	return append(out, r.buf[:r.next]...)
}

func (h *lagHistory) latest(group string) (sample, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.groups[group]
	if r == nil || (!r.full && r.next == 0) {
		return sample{}, false
	}
	return r.buf[(r.next-1+len(r.buf))%len(r.buf)], true
}

// keepOnly forgets the groups not in seen (deleted since).
func (h *lagHistory) keepOnly(seen map[string]bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for g := range h.groups {
		if !seen[g] {
			delete(h.groups, g)
		}
	}
}
