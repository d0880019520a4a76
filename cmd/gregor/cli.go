package main

import (
	"context"
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

	"github.com/gregorbroker/gregor/config"
)

const serveUsage = `usage: gregor serve [--config server.properties] [--override name=value]...
                    [--data-dir DIR] [--listen host:port] [--log-level LEVEL]

Runs a node. Without --config it is a complete single-node cluster: broker
on localhost:9092, controller on localhost:9093, data in ./data, internal
topics with one replica (as Kafka's sample server.properties).

--config reads a Kafka server.properties file (KRaft). --override sets one
property, as kafka-server-start's --override does. --data-dir sets log.dirs
and --listen the PLAINTEXT listener. Flags apply in order over the file, so
a later flag wins over an earlier one.

flags:
`

// propertyEdit changes the property map before it is parsed.
type propertyEdit func(props map[string]string) error

// editFlag is a repeatable flag whose values become property edits, kept
// in command-line order across all such flags so that the last one wins.
type editFlag struct {
	edits *[]propertyEdit
	parse func(string) (propertyEdit, error)
}

func (f editFlag) String() string { return "" }

func (f editFlag) Set(s string) error {
	e, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.edits = append(*f.edits, e)
	return nil
}

// serveConfig turns the arguments of `gregor serve` into the node's
// configuration, and returns the property names it does not know, for the
// caller to log.
func serveConfig(args []string) (*config.Broker, []string, error) {
	return serveConfigOut(args, os.Stderr)
}

// serveConfigOut is serveConfig with the usage and flag errors written to
// out.
func serveConfigOut(args []string, out io.Writer) (*config.Broker, []string, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, serveUsage)
		fs.PrintDefaults()
	}
	var path string
	var edits []propertyEdit
	fs.StringVar(&path, "config", "", "a Kafka `server.properties` file")
	fs.Var(editFlag{&edits, parseOverride}, "override", "set a property, as `name=value` (repeatable)")
	fs.Var(editFlag{&edits, parseDataDir}, "data-dir", "the data `directory` (log.dirs)")
	fs.Var(editFlag{&edits, parseListen}, "listen", "the PLAINTEXT listener's `host:port`; an empty host (\":9092\") binds all interfaces")
	fs.Var(editFlag{&edits, parseLogLevel}, "log-level", "the least severe log lines written: `debug|info|warn|error` (log.level)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err // flag.ErrHelp for -h, which the caller treats as success
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("serve: unexpected argument %q (see gregor serve -h)", fs.Arg(0))
	}

	return loadConfig("serve", path, edits)
}

// loadConfig builds a node's configuration as serve does: the embedded
// single-node defaults or the file at path, then the edits in order. It
// returns the property names it does not know. op names the command in
// errors.
func loadConfig(op, path string, edits []propertyEdit) (*config.Broker, []string, error) {
	props := config.DevProperties()
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", op, err)
		}
		props, err = config.ReadProperties(f)
		f.Close()
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %w", op, path, err)
		}
	}
	for _, e := range edits {
		if err := e(props); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", op, err)
		}
	}
	b, unknown, err := config.Parse(props)
	if err != nil {
		if path != "" {
			return nil, unknown, fmt.Errorf("%s: %s: %w", op, path, err)
		}
		return nil, unknown, fmt.Errorf("%s: %w", op, err)
	}
	return b, unknown, nil
}

// parseOverride reads --override name=value. The value may be empty; the
// name may not, as in kafka-server-start.
func parseOverride(s string) (propertyEdit, error) {
	name, val, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(name) == "" {
		return nil, fmt.Errorf("%q is not name=value", s)
	}
	name = strings.TrimSpace(name)
	return func(props map[string]string) error {
		props[name] = val
		return nil
	}, nil
}

// parseLogLevel reads --log-level, which sets log.level (checked with the
// other properties).
func parseLogLevel(s string) (propertyEdit, error) {
	return func(props map[string]string) error {
		props["log.level"] = s
		return nil
	}, nil
}

func parseDataDir(s string) (propertyEdit, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("the data directory must not be empty")
	}
	if strings.Contains(s, ",") {
		return nil, fmt.Errorf("%q: give one directory; use --override log.dirs=a,b for several", s)
	}
	return func(props map[string]string) error {
		props["log.dirs"] = s
		return nil
	}, nil
}

// parseListen reads --listen host:port and returns an edit that points the
// PLAINTEXT listener there, adding it if the listeners have none. If the
// configuration advertises a PLAINTEXT listener explicitly, that one moves
// to the new port too, and to the new host when one is given.
func parseListen(s string) (propertyEdit, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not host:port: %w", s, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("%q: port must be a number from 0 to 65535", s)
	}
	want := config.Listener{Name: "PLAINTEXT", Host: host, Port: port}
	return func(props map[string]string) error {
		current, ok := props["listeners"]
		if !ok {
			current = listenersString(config.Default().Listeners)
		}
		ls, err := config.ParseListeners(current)
		if err != nil {
			return fmt.Errorf("--listen: listeners: %w", err)
		}
		props["listeners"] = listenersString(replaceListener(ls, want))

		adv, ok := props["advertised.listeners"]
		if !ok {
			return nil
		}
		als, err := config.ParseListeners(adv)
		if err != nil {
			return fmt.Errorf("--listen: advertised.listeners: %w", err)
		}
		for i, l := range als {
			if l.Name == want.Name {
				als[i].Port = want.Port
				if want.Host != "" {
					als[i].Host = want.Host
				}
			}
		}
		props["advertised.listeners"] = listenersString(als)
		return nil
	}, nil
}

// replaceListener puts l in place of the listener of the same name, or
// first when there is none.
func replaceListener(ls []config.Listener, l config.Listener) []config.Listener {
	for i := range ls {
		if ls[i].Name == l.Name {
			ls[i] = l
			return ls
		}
	}
	return append([]config.Listener{l}, ls...)
}

func listenersString(ls []config.Listener) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.String()
	}
	return strings.Join(parts, ",")
}

// commands is the CLI's tree: `gregor <noun> <verb>` or `gregor <verb>`.
func commands() []*command {
	return []*command{
		{name: "serve", short: "run a node (broker and controller)", raw: func(args []string, _ io.Reader, _, errOut io.Writer) error {
			return runServe(args, errOut)
		}},
		formatCommand(),
		containerCommand(),
		containerHealthCommand(),
		randomUUIDCommand(),
		topicCommand(),
		produceCommand(),
		consumeCommand(),
		offsetsCommand(),
		groupCommand(),
		clusterCommand(),
		quorumCommand(),
		configCommand(),
		aclCommand(),
		userCommand(),
		certCommand(),
		txnCommand(),
		{name: "perf", short: "measure produce or consume throughput", raw: func(args []string, _ io.Reader, out, errOut io.Writer) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runPerfTo(ctx, args, out, errOut)
		}},
		{name: "version", aliases: []string{"--version", "-v"}, short: "print the version", raw: func(_ []string, _ io.Reader, out, _ io.Writer) error {
			return runVersion(out)
		}},
	}
}

// dispatch finds the command args name under cmds and runs it. parent is
// the path so far ("topic"), for messages.
func dispatch(cmds []*command, parent []string, args []string, in io.Reader, out, errOut io.Writer) error {
	if len(args) == 0 {
		printCommands(errOut, parent, cmds)
		return usagef("%s", missingWhat(parent))
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" {
		if len(args) > 1 && len(parent) == 0 {
			// `gregor help topic create` is `gregor topic create -h`.
			return dispatch(cmds, nil, append(args[1:], "-h"), in, out, errOut)
		}
		printCommands(out, parent, cmds)
		return flag.ErrHelp
	}
	found := findCommand(cmds, name)
	if found == nil {
		return unknownCommand(cmds, parent, name)
	}
	path := append(slices.Clone(parent), found.name)
	switch {
	case found.raw != nil:
		return found.raw(args[1:], in, out, errOut)
	case found.sub != nil:
		return dispatch(found.sub, path, args[1:], in, out, errOut)
	}
	c := newCmd(found, strings.Join(path, " "), args[1:], in, out, errOut)
	defer c.close()
	err := found.run(c)
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	return c.explain(err)
}

func findCommand(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name || slices.Contains(c.aliases, name) {
			return c
		}
	}
	return nil
}

func missingWhat(parent []string) string {
	if len(parent) == 0 {
		return "give a command"
	}
	return strings.Join(parent, " ") + " needs a subcommand"
}

// unknownCommand says name is not a command and suggests the nearest one.
func unknownCommand(cmds []*command, parent []string, name string) error {
	var names []string
	for _, c := range cmds {
		names = append(names, c.name)
		names = append(names, c.aliases...)
	}
	where := "gregor"
	if len(parent) > 0 {
		where = "gregor " + strings.Join(parent, " ")
	}
	if s := nearest(name, names); s != "" {
		return usagef("unknown command %q for %s; did you mean %q?", name, where, s)
	}
	return usagef("unknown command %q for %s (see %s -h)", name, where, where)
}

// printCommands lists cmds with their one-line descriptions.
func printCommands(w io.Writer, parent []string, cmds []*command) {
	path := strings.Join(append([]string{"gregor"}, parent...), " ")
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", path)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range cmds {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.short)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nRun `%s <command> -h` for a command's flags and examples.\n", path)
	if len(parent) == 0 {
		fmt.Fprintln(w, "Admin commands reach the cluster at -b HOST:PORT, else $GREGOR_BROKERS, else localhost:9092.")
	}
}
