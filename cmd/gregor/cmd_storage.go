package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/gregorbroker/gregor/broker"
)

const formatUsage = `usage: gregor format --cluster-id ID [--config server.properties] [--override name=value]...
                     [--data-dir DIR] [--ignore-formatted]

Formats a node's log dirs (and metadata log dir) for a cluster, as
kafka-storage.sh format does: each gets a meta.properties with the
cluster id, the node.id and a new directory.id. The nodes of a multi-node
cluster must share one cluster id: run ` + "`gregor random-uuid`" + ` once and format
every node with it before its first start. A single node needs no format
step: it formats itself on first start.

examples:
  id=$(gregor random-uuid)
  gregor format --cluster-id "$id" --config server.properties
  gregor format -t "$id" -c node2.properties --ignore-formatted

flags:
`

// formatCommand is `gregor format`, kafka-storage.sh format.
func formatCommand() *command {
	return &command{name: "format", short: "format a node's log dirs for a cluster id (kafka-storage format)",
		raw: func(args []string, _ io.Reader, out, errOut io.Writer) error {
			return runFormat(args, out, errOut)
		}}
}

func runFormat(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("format", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprint(errOut, formatUsage)
		fs.PrintDefaults()
	}
	var path, clusterID string
	var ignore bool
	var edits []propertyEdit
	for _, name := range []string{"cluster-id", "t"} {
		fs.StringVar(&clusterID, name, "", "the cluster `id` (from gregor random-uuid)")
	}
	for _, name := range []string{"config", "c"} {
		fs.StringVar(&path, name, "", "the node's `server.properties`")
	}
	for _, name := range []string{"ignore-formatted", "g"} {
		fs.BoolVar(&ignore, name, false, "skip dirs formatted already instead of failing")
	}
	fs.Var(editFlag{&edits, parseOverride}, "override", "set a property, as `name=value` (repeatable)")
	fs.Var(editFlag{&edits, parseDataDir}, "data-dir", "the data `directory` (log.dirs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("format: unexpected argument %q (see gregor format -h)", fs.Arg(0))
	}
	if clusterID == "" {
		return usagef("format: --cluster-id is required (make one with gregor random-uuid)")
	}
	cfg, _, err := loadConfig("format", path, edits)
	if err != nil {
		return err
	}
	done, err := broker.Format(nil, cfg, clusterID, ignore, time.Now())
	for _, d := range done {
		if d.Skipped {
			fmt.Fprintf(out, "Log directory %s is already formatted for cluster %s; left as it is.\n", d.Dir, clusterID)
			continue
		}
		fmt.Fprintf(out, "Formatting %s for cluster %s, node %d.\n", d.Dir, clusterID, cfg.NodeID)
	}
	return err
}

// randomUUIDCommand is `gregor random-uuid`, kafka-storage.sh random-uuid.
func randomUUIDCommand() *command {
	return &command{name: "random-uuid", short: "print a new cluster id for gregor format",
		raw: func(args []string, _ io.Reader, out, _ io.Writer) error {
			if len(args) > 0 {
				if args[0] == "-h" || args[0] == "--help" {
					fmt.Fprintln(out, "usage: gregor random-uuid\n\nPrints a new cluster id (a random UUID in URL-safe base64, as kafka-storage.sh random-uuid) for gregor format --cluster-id.")
					return flag.ErrHelp
				}
				return usagef("random-uuid takes no arguments")
			}
			_, err := fmt.Fprintln(out, broker.NewClusterID())
			return err
		}}
}
