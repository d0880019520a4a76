package integration

import (
	"flag"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

var nfTxnLog = flag.Bool("netfault.txnlog", false,
	"log the transactional client's last debug lines at the end of each fault run, passed or not")

// nfClientLog keeps the last lines a franz-go client logged at debug
// level, so a fault run whose transactional producer stalls can show what
// the client saw (which broker it asked, what each answered) without
// flooding the log of a run that passes.
type nfClientLog struct {
	mu    sync.Mutex
	lines []string // a ring of the last cap(lines) lines
	next  int      // where the next line goes once the ring is full
	total int
}

func newNFClientLog(keep int) *nfClientLog {
	return &nfClientLog{lines: make([]string, 0, keep)}
}

// Level implements kgo.Logger.
func (l *nfClientLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }

// Log implements kgo.Logger.
func (l *nfClientLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", time.Now().Format("15:04:05.000"), level, msg)
	for i := 0; i+1 < len(keyvals); i += 2 {
		fmt.Fprintf(&b, " %v=%v", keyvals[i], keyvals[i+1])
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total++
	if len(l.lines) < cap(l.lines) {
		l.lines = append(l.lines, b.String())
		return
	}
	l.lines[l.next] = b.String()
	l.next = (l.next + 1) % len(l.lines)
}

// String is the lines kept, oldest first, with how many went before.
func (l *nfClientLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	if dropped := l.total - len(l.lines); dropped > 0 {
		fmt.Fprintf(&b, "(%d earlier lines not kept)\n", dropped)
	}
	for i := range l.lines {
		b.WriteString(l.lines[(l.next+i)%len(l.lines)])
		b.WriteByte('\n')
	}
	return b.String()
}
