package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

func userCommand() *command {
	const long = `Users are SCRAM credentials in the metadata log (kafka-configs --entity-type users
--alter --add-config 'SCRAM-SHA-256=[...]'); PLAIN users come from the listener's JAAS
config instead. The broker salts nothing: the CLI derives the salted password and
sends only that.`
	return &command{name: "user", aliases: []string{"users"}, short: "create, list and delete SCRAM users", sub: []*command{
		{name: "create", aliases: []string{"add", "alter"}, args: "USER", run: userCreate, long: long,
			short: "set a user's SCRAM password (creating the user, or replacing the password)",
			examples: `  gregor user create alice --password alice-secret
  gregor user create alice --mechanism SCRAM-SHA-512 --iterations 8192 < password.txt
  gregor user create bob              # asks for the password`},
		{name: "list", aliases: []string{"ls", "describe"}, args: "[USER...]", run: userList,
			short: "list users with their SCRAM mechanisms and iterations",
			examples: `  gregor user list
  gregor user list alice --json`},
		{name: "delete", aliases: []string{"rm"}, args: "USER...", run: userDelete, long: long,
			short: "delete users' SCRAM credentials (every mechanism unless --mechanism)",
			examples: `  gregor user delete alice
  gregor user delete alice --mechanism SCRAM-SHA-512`},
	}}
}

// parseScramMechanism reads SCRAM-SHA-256 or SCRAM-SHA-512 (or 256, 512).
func parseScramMechanism(s string) (kadm.ScramMechanism, error) {
	switch strings.ToUpper(strings.TrimPrefix(strings.ToUpper(s), "SCRAM-SHA-")) {
	case "256":
		return kadm.ScramSha256, nil
	case "512":
		return kadm.ScramSha512, nil
	}
	return 0, usagef("--mechanism %q is not SCRAM-SHA-256 or SCRAM-SHA-512", s)
}

func userCreate(c *cmd) error {
	var mech, password string
	var iterations int
	c.stringVar(&mech, "mechanism", "", "SCRAM-SHA-256", "the SCRAM `mechanism`: SCRAM-SHA-256 or SCRAM-SHA-512")
	c.stringVar(&password, "password", "", "", "the `password`; without it, the first line of stdin (asked for on a terminal)")
	c.intVar(&iterations, "iterations", "", 4096, "the SCRAM iteration `count`, 4096 to 16384")
	if err := c.parse(1, 1); err != nil {
		return err
	}
	m, err := parseScramMechanism(mech)
	if err != nil {
		return err
	}
	if iterations < 4096 || iterations > 16384 {
		return usagef("%s: --iterations %d is not from 4096 to 16384", c.path, iterations)
	}
	if password == "" {
		if password, err = c.readPassword(); err != nil {
			return err
		}
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	user := c.args[0]
	res, err := adm.AlterUserSCRAMs(c.context(), nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: int32(iterations), Password: password}})
	if err != nil {
		return fmt.Errorf("alter SCRAM credentials: %w", err)
	}
	r, ok := res[user]
	if !ok {
		r.Err = errNoAnswer
	}
	return c.reportOutcomes("user", []outcome{{name: user + " " + m.String(), err: r.Err, msg: r.ErrMessage}})
}

// readPassword reads the first line of stdin, prompting on stderr with
// the terminal's echo off when stdin is a terminal.
func (c *cmd) readPassword() (string, error) {
	if f, ok := c.in.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprint(c.errOut, "password: ")
			// stty, not a terminal library: the module has none, and this
			// is the one place the CLI reads from a terminal.
			if echoOff(f) == nil {
				defer func() {
					echoOn(f)
					fmt.Fprintln(c.errOut)
				}()
			}
		}
	}
	line, err := bufio.NewReader(c.in).ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		if err != nil && err.Error() != "EOF" {
			return "", fmt.Errorf("%s: read the password: %w", c.path, err)
		}
		return "", usagef("%s: give --password or the password on stdin", c.path)
	}
	return line, nil
}

// userRow is one user's credentials in `user list`.
type userRow struct {
	User       string          `json:"user"`
	Mechanisms []userMechanism `json:"mechanisms"`
	Error      string          `json:"error,omitempty"`
}

type userMechanism struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func userList(c *cmd) error {
	if err := c.parse(0, -1); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	res, err := adm.DescribeUserSCRAMs(c.context(), c.args...)
	if err != nil {
		return fmt.Errorf("describe SCRAM credentials: %w", err)
	}
	out := []userRow{}
	var rows [][]string
	failed := 0
	for _, d := range res.Sorted() {
		r := userRow{User: d.User, Mechanisms: []userMechanism{}, Error: jsonErr(d.Err, d.ErrMessage)}
		var mechs []string
		for _, ci := range d.CredInfos {
			r.Mechanisms = append(r.Mechanisms, userMechanism{ci.Mechanism.String(), ci.Iterations})
			mechs = append(mechs, fmt.Sprintf("%s (%d iterations)", ci.Mechanism, ci.Iterations))
		}
		if d.Err != nil {
			failed++
			mechs = []string{errText(d.Err, d.ErrMessage)}
		}
		out = append(out, r)
		rows = append(rows, []string{d.User, strings.Join(mechs, ", ")})
	}
	return c.report([]string{"USER", "SCRAM"}, rows, out, failed, "users")
}

func userDelete(c *cmd) error {
	var mech string
	c.stringVar(&mech, "mechanism", "", "", "delete only this `mechanism`'s credential (SCRAM-SHA-256 or SCRAM-SHA-512)")
	if err := c.parse(1, -1); err != nil {
		return err
	}
	adm, err := c.admin()
	if err != nil {
		return err
	}
	var del []kadm.DeleteSCRAM
	if mech != "" {
		m, err := parseScramMechanism(mech)
		if err != nil {
			return err
		}
		for _, u := range c.args {
			del = append(del, kadm.DeleteSCRAM{User: u, Mechanism: m})
		}
	} else {
		// Every mechanism the user has: read them first, as the request
		// names one mechanism per deletion.
		described, err := adm.DescribeUserSCRAMs(c.context(), c.args...)
		if err != nil {
			return fmt.Errorf("describe SCRAM credentials: %w", err)
		}
		var res []outcome
		for _, u := range c.args {
			d := described[u]
			if d.Err != nil {
				res = append(res, outcome{name: u, err: d.Err, msg: d.ErrMessage})
				continue
			}
			for _, ci := range d.CredInfos {
				del = append(del, kadm.DeleteSCRAM{User: u, Mechanism: ci.Mechanism})
			}
		}
		if len(res) > 0 {
			return c.reportOutcomes("user", res)
		}
	}
	// Kafka refuses a request that alters one user twice
	// (DUPLICATE_RESOURCE), so each mechanism of a user goes in its own
	// request; the first failure of a user is its outcome.
	failed := map[string]outcome{}
	for len(del) > 0 {
		var round, later []kadm.DeleteSCRAM
		inRound := map[string]bool{}
		for _, d := range del {
			if inRound[d.User] {
				later = append(later, d)
				continue
			}
			inRound[d.User] = true
			round = append(round, d)
		}
		altered, err := adm.AlterUserSCRAMs(c.context(), round, nil)
		if err != nil {
			return fmt.Errorf("alter SCRAM credentials: %w", err)
		}
		for _, d := range round {
			r, ok := altered[d.User]
			if !ok {
				r.Err = errNoAnswer
			}
			if _, seen := failed[d.User]; r.Err != nil && !seen {
				failed[d.User] = outcome{name: d.User, err: r.Err, msg: r.ErrMessage}
			}
		}
		del = later
	}
	var res []outcome
	for _, u := range c.args {
		if o, ok := failed[u]; ok {
			res = append(res, o)
			continue
		}
		res = append(res, outcome{name: u})
	}
	return c.reportOutcomes("user", res)
}

func echoOff(tty *os.File) error { return stty(tty, "-echo") }

func echoOn(tty *os.File) error { return stty(tty, "echo") }

func stty(tty *os.File, arg string) error {
	cmd := exec.Command("stty", arg)
	cmd.Stdin = tty
	return cmd.Run()
}
