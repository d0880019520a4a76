package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The admin CLI (`gregor <noun> <verb>`) is a tree of commands. Every leaf
// parses its own flags on a cmd, which carries the flags all commands
// share (-b/--brokers, --json, --timeout), the streams, and a lazily made
// client.

// command is one node of the CLI tree: a noun with verbs, or a leaf.
type command struct {
	name     string
	aliases  []string
	args     string // the positional arguments in the usage line
	short    string // one line for the parent's list
	long     string // more text for -h, optional
	examples string // lines of examples for -h
	run      func(*cmd) error
	// argFlag names a flag that gives the positional arguments too, as
	// Kafka's tools take them (--topic T, --group G).
	argFlag string
	// raw runs a command that parses its own arguments (serve, perf).
	raw func(args []string, in io.Reader, out, errOut io.Writer) error
	sub []*command
}

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// defaultBrokers is where commands connect without -b: GREGOR_BROKERS,
// else Kafka's default listener.
func defaultBrokers() string {
	if b := os.Getenv("GREGOR_BROKERS"); b != "" {
		return b
	}
	return "localhost:9092"
}

// cmd is one run of a leaf command.
type cmd struct {
	spec    *command
	path    string // "topic create"
	fs      *flag.FlagSet
	short   map[string]string // long name -> one-letter alias
	in      io.Reader
	out     io.Writer
	errOut  io.Writer
	raw     []string // the arguments after the command's name
	args    []string // the positional arguments, after parse
	named   []string // the values of the spec's argFlag
	brokers string
	json    bool
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	cl      *kgo.Client
	adm     *kadm.Client
	sec     clientSecurity
}

func newCmd(spec *command, path string, raw []string, in io.Reader, out, errOut io.Writer) *cmd {
	c := &cmd{spec: spec, path: path, raw: raw, in: in, out: out, errOut: errOut, short: map[string]string{}}
	c.fs = flag.NewFlagSet(path, flag.ContinueOnError)
	c.fs.SetOutput(io.Discard)
	c.fs.Usage = func() {}
	c.stringVar(&c.brokers, "brokers", "b", defaultBrokers(), "comma-separated `host:port` list of brokers (env GREGOR_BROKERS)")
	c.fs.StringVar(&c.brokers, "bootstrap-server", defaultBrokers(), "same as --brokers, as Kafka's tools name it")
	c.fs.BoolVar(&c.json, "json", false, "print JSON for scripts instead of a table")
	c.fs.DurationVar(&c.timeout, "timeout", 30*time.Second, "give up after this long")
	c.securityFlags()
	if spec.argFlag != "" {
		c.listVar(&c.named, spec.argFlag, "", "the same as the "+spec.args+" argument, as Kafka's tools take it")
	}
	return c
}

// close releases the client and the context.
func (c *cmd) close() {
	if c.cl != nil {
		c.cl.Close()
	}
	if c.cancel != nil {
		c.cancel()
	}
}

// stringVar registers a string flag under its long name and, when short
// is set, a one-letter alias.
func (c *cmd) stringVar(p *string, name, short, def, usage string) {
	c.fs.StringVar(p, name, def, usage)
	c.alias(name, short)
}

func (c *cmd) intVar(p *int, name, short string, def int, usage string) {
	c.fs.IntVar(p, name, def, usage)
	c.alias(name, short)
}

func (c *cmd) int64Var(p *int64, name, short string, def int64, usage string) {
	c.fs.Int64Var(p, name, def, usage)
	c.alias(name, short)
}

func (c *cmd) boolVar(p *bool, name, short string, def bool, usage string) {
	c.fs.BoolVar(p, name, def, usage)
	c.alias(name, short)
}

// listVar registers a repeatable flag collecting every value.
func (c *cmd) listVar(p *[]string, name, short, usage string) {
	c.fs.Var((*listFlag)(p), name, usage)
	c.alias(name, short)
}

func (c *cmd) alias(name, short string) {
	if short == "" {
		return
	}
	f := c.fs.Lookup(name)
	c.fs.Var(f.Value, short, f.Usage)
	c.short[name] = short
}

// listFlag is a flag that may be given many times.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// parse reads the flags, which may come before, between or after the
// positional arguments, and checks that there are min to max of those
// (max < 0: no limit). -h prints the help and returns flag.ErrHelp.
func (c *cmd) parse(min, max int) error {
	rest := c.raw
	for {
		if err := c.fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.help(c.out)
				return err
			}
			return c.flagError(err)
		}
		if c.fs.NArg() == 0 {
			break
		}
		// A "--" ends the flags: whatever follows is positional.
		consumed := len(rest) - c.fs.NArg()
		if consumed > 0 && rest[consumed-1] == "--" {
			c.args = append(c.args, c.fs.Args()...)
			break
		}
		c.args = append(c.args, c.fs.Arg(0))
		rest = c.fs.Args()[1:]
	}
	c.args = append(c.args, c.named...)
	if len(c.args) < min {
		return usagef("%s needs %s (see gregor %s -h)", c.path, c.spec.args, c.path)
	}
	if max >= 0 && len(c.args) > max {
		return usagef("%s: unexpected argument %q (see gregor %s -h)", c.path, c.args[max], c.path)
	}
	if len(c.seeds()) == 0 {
		return usagef("%s: --brokers names no broker", c.path)
	}
	return nil
}

// flagError turns the flag package's error into a usage error that
// suggests the nearest flag.
func (c *cmd) flagError(err error) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		name = strings.TrimLeft(name, "-")
		c.fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		if s := nearest(name, names); s != "" {
			return usagef("%s: unknown flag %s; did you mean %s?", c.path, flagName(name), flagName(s))
		}
		return usagef("%s: unknown flag %s (see gregor %s -h)", c.path, flagName(name), c.path)
	}
	return usagef("%s: %s (see gregor %s -h)", c.path, msg, c.path)
}

func flagName(s string) string {
	if len(s) == 1 {
		return "-" + s
	}
	return "--" + s
}

// help prints the usage line, description, flags and examples.
func (c *cmd) help(w io.Writer) {
	fmt.Fprintf(w, "usage: %s [flags]\n\n%s\n", strings.Join(slices.DeleteFunc([]string{"gregor", c.path, c.spec.args}, func(s string) bool { return s == "" }), " "), c.spec.short)
	if c.spec.long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.spec.long))
	}
	fmt.Fprintln(w, "\nflags:")
	c.printFlags(w)
	if c.spec.examples != "" {
		fmt.Fprintf(w, "\nexamples:\n%s\n", strings.TrimRight(c.spec.examples, "\n"))
	}
}

// printFlags lists each flag once, with its one-letter alias.
func (c *cmd) printFlags(w io.Writer) {
	aliases := map[string]bool{}
	for _, s := range c.short {
		aliases[s] = true
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	c.fs.VisitAll(func(f *flag.Flag) {
		if aliases[f.Name] {
			return
		}
		kind, usage := flag.UnquoteUsage(f)
		names := "    --" + f.Name
		if s, ok := c.short[f.Name]; ok {
			names = "-" + s + ", --" + f.Name
		}
		if kind != "" {
			names += " " + kind
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\n", names, usage)
	})
	tw.Flush()
}

// seeds returns the --brokers list.
func (c *cmd) seeds() []string {
	var out []string
	for _, b := range strings.Split(c.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}

// context returns the command's context: cancelled after --timeout.
func (c *cmd) context() context.Context {
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithTimeout(context.Background(), c.timeout)
	}
	return c.ctx
}

// interruptible returns a context cancelled by SIGINT or SIGTERM (and not
// by --timeout), for commands that run until stopped.
func (c *cmd) interruptible() context.Context {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	prev := c.cancel
	c.ctx, c.cancel = ctx, func() {
		stop()
		if prev != nil {
			prev()
		}
	}
	return ctx
}

// client connects to the cluster. It first checks that some seed broker
// accepts a connection, so that a cluster that is down is reported at
// once and in plain words, not after the client's retries.
func (c *cmd) client(opts ...kgo.Opt) (*kgo.Client, error) {
	if c.cl != nil {
		return c.cl, nil
	}
	if err := reachable(c.seeds()); err != nil {
		return nil, err
	}
	sec, err := c.securityOpts()
	if err != nil {
		return nil, err
	}
	all := append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.ClientID("gregor-cli")}, sec...)
	all = append(all, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.path, err)
	}
	c.cl = cl
	return cl, nil
}

// admin returns an admin client on the command's connection.
func (c *cmd) admin() (*kadm.Client, error) {
	if c.adm != nil {
		return c.adm, nil
	}
	cl, err := c.client()
	if err != nil {
		return nil, err
	}
	c.adm = kadm.NewClient(cl)
	return c.adm, nil
}

// brokerDownError says that no seed broker could be reached.
type brokerDownError struct {
	brokers []string
	reason  string
}

func (e *brokerDownError) Error() string {
	return fmt.Sprintf("cannot reach a broker at %s (%s).\nIs gregor running there? Start one with `gregor serve`, or point at another with -b HOST:PORT or GREGOR_BROKERS.",
		strings.Join(e.brokers, ","), e.reason)
}

// reachable dials each seed until one answers.
func reachable(seeds []string) error {
	var reason string
	for _, s := range seeds {
		conn, err := net.DialTimeout("tcp", s, 5*time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		reason = dialReason(err)
	}
	return &brokerDownError{brokers: seeds, reason: reason}
}

// dialReason names why a dial failed in a few words.
func dialReason(err error) string {
	var dns *net.DNSError
	var addr *net.AddrError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dns):
		return "unknown host " + dns.Name
	case errors.As(err, &addr):
		return addr.Err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "no answer within 5s"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	}
	return err.Error()
}

// explain rewrites errors that leave the client (a broker gone during the
// command, a timeout) in the CLI's words.
func (c *cmd) explain(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ECONNREFUSED):
		return &brokerDownError{brokers: c.seeds(), reason: "connection refused"}
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w (no answer within --timeout %v)", err, c.timeout)
	}
	return err
}

// table writes rows aligned under header.
func (c *cmd) table(header []string, rows [][]string) error {
	return writeTable(c.out, header, rows)
}

func writeTable(w io.Writer, header []string, rows [][]string) error {
	return writeRows(w, append([][]string{header}, rows...))
}

// writeRows writes rows aligned, without a header.
func writeRows(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// printJSON writes v as indented JSON.
func (c *cmd) printJSON(v any) error {
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseConfigPairs reads name=value arguments (a value may be empty).
func parseConfigPairs(pairs []string) (map[string]*string, error) {
	out := map[string]*string{}
	for _, p := range pairs {
		name, val, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, usagef("%q is not name=value", p)
		}
		out[strings.TrimSpace(name)] = &val
	}
	return out, nil
}

// parsePartitions reads "0,2,5" (repeatable) into partition numbers.
func parsePartitions(list []string) ([]int32, error) {
	var out []int32
	for _, l := range list {
		for _, s := range strings.Split(l, ",") {
			p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
			if err != nil || p < 0 {
				return nil, usagef("%q is not a partition number", s)
			}
			out = append(out, int32(p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// parseTime reads a point in time: Unix milliseconds, RFC 3339
// (2026-12-01T10:00:00Z), a date and time in UTC (2026-12-01 10:00:00,
// 2026-12-01T10:00:00), a date, or a duration ago (-1h, 10m).
func parseTime(s string, now time.Time) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000", "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(s, "-")); err == nil {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("%q is not a time: give Unix milliseconds, RFC 3339 (2026-12-01T10:00:00Z), a date, or a duration ago (1h)", s)
}

// nearest returns the candidate closest to s, if close enough to be the
// likely intent (a typo, or a unique prefix), else "".
func nearest(s string, candidates []string) string {
	if len(s) < 2 {
		return "" // every one-letter name is one edit away
	}
	best, bestDist := "", len(s)/2+2
	for _, c := range candidates {
		if strings.HasPrefix(c, s) {
			return c
		}
		if d := editDistance(s, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist > 2 && bestDist*2 > len(s) {
		return ""
	}
	return best
}

// editDistance is the Damerau-Levenshtein distance (optimal string
// alignment): a swap of two neighbours counts as one edit.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// humanBytes prints a size as Kafka's tools do not, but people read: 1.5 MiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func itoa[T ~int | ~int16 | ~int32 | ~int64](v T) string { return strconv.FormatInt(int64(v), 10) }

func int32List(ps []int32) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = itoa(p)
	}
	return strings.Join(s, ",")
}

// report prints the result of a change to several things: a table for
// people or v as JSON, and an error when failed of them did not change,
// for a non-zero exit.
func (c *cmd) report(header []string, rows [][]string, v any, failed int, what string) error {
	var err error
	if c.json {
		err = c.printJSON(v)
	} else {
		err = c.table(header, rows)
	}
	if err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d of %d %s failed", c.path, failed, len(rows), what)
	}
	return nil
}

// outcome is how an admin call ended for one named topic or group.
type outcome struct {
	name string
	err  error
	msg  string // the broker's error message, if any
}

// reportOutcomes prints a row per outcome, "TOPIC STATUS" for key
// "topic" (in JSON, {"topic": name, "error": …}), and fails when any of
// them failed.
func (c *cmd) reportOutcomes(key string, res []outcome) error {
	var rows [][]string
	out := []map[string]string{}
	failed := 0
	for _, r := range res {
		if r.err != nil {
			failed++
		}
		rows = append(rows, []string{r.name, errText(r.err, r.msg)})
		out = append(out, map[string]string{key: r.name, "error": jsonErr(r.err, r.msg)})
	}
	return c.report([]string{strings.ToUpper(key), "STATUS"}, rows, out, failed, key+"s")
}

// errText is "OK" or the error with the broker's message: the code's
// name and, when the broker gave one, its message.
func errText(err error, msg string) string {
	if err == nil {
		return "OK"
	}
	var ke *kerr.Error
	if msg == "" || !errors.As(err, &ke) {
		return err.Error()
	}
	if strings.HasPrefix(msg, ke.Message) {
		return msg
	}
	return ke.Message + ": " + msg
}

// jsonErr is the error field of JSON output: empty when there is none.
func jsonErr(err error, msg string) string {
	if err == nil {
		return ""
	}
	return errText(err, msg)
}

// errNoAnswer is a thing the broker's answer left out.
var errNoAnswer = errors.New("not in the broker's answer")
