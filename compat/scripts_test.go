package compat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gregorbroker/gregor/compat/harness"
)

// systemPython is Debian's interpreter: python3-kafka and
// python3-confluent-kafka live in its dist-packages, which a python3
// from pyenv or a virtualenv earlier on PATH would not see.
const systemPython = "/usr/bin/python3"

func confluentPython() clientImpl {
	return scriptClient("confluent-kafka-python", []string{systemPython, "python/confluent_scenarios.py"},
		pythonModule("confluent_kafka", "python3-confluent-kafka"))
}

// pyVenv is the virtualenv make compat-deps fills from
// python/requirements.txt (PyPI), for the newer Python client.
const pyVenv = "out/pyvenv/bin/python"

// confluentPython2 is the same scenarios on confluent-kafka 2.x from PyPI,
// whose wheel bundles a current librdkafka.
func confluentPython2() clientImpl {
	return scriptClient("confluent-kafka-python-2", []string{pyVenv, "python/confluent_scenarios.py"}, func() error {
		if err := exec.Command(pyVenv, "-c", "import confluent_kafka").Run(); err != nil {
			return fmt.Errorf("%s cannot import confluent_kafka (%v): run make compat-deps (PyPI, compat/python/requirements.txt)", pyVenv, err)
		}
		return nil
	})
}

// aiokafkaPython is the scenarios on aiokafka (asyncio) from PyPI, in the
// same virtualenv.
func aiokafkaPython() clientImpl {
	return scriptClient("aiokafka", []string{pyVenv, "python/aiokafka_scenarios.py"}, func() error {
		if err := exec.Command(pyVenv, "-c", "import aiokafka, cramjam").Run(); err != nil {
			return fmt.Errorf("%s cannot import aiokafka and cramjam (%v): run make compat-deps (PyPI, compat/python/requirements.txt)", pyVenv, err)
		}
		return nil
	})
}

func kafkaPython() clientImpl {
	return scriptClient("kafka-python", []string{systemPython, "python/kafka_python_scenarios.py"},
		pythonModule("kafka", "python3-kafka"))
}

func kafkajs() clientImpl {
	return scriptClient("kafkajs", []string{"node", "node/kafkajs_scenarios.js"}, func() error {
		if err := needTool("node"); err != nil {
			return err
		}
		if _, err := os.Stat("node/node_modules/kafkajs/package.json"); err != nil {
			return fmt.Errorf("kafkajs is not installed under compat/node: run make compat-deps")
		}
		return nil
	})
}

func pythonModule(module, pkg string) func() error {
	return func() error {
		if err := exec.Command(systemPython, "-c", "import "+module).Run(); err != nil {
			return fmt.Errorf("%s cannot import %s (%v): run make compat-deps (Debian %s)", systemPython, module, err, pkg)
		}
		return nil
	}
}

// scriptClient runs each scenario as one process of a script that takes
// --bootstrap, --strict, --scenario and --topic and prints one JSON line
// {"status", "reason"} on stdout.
func scriptClient(name string, argv []string, available func() error) clientImpl {
	s := map[string]scenarioFunc{}
	for _, sc := range harness.Scenarios {
		id := sc.ID
		s[id] = func(ctx context.Context, e *env) (string, error) { return runScript(ctx, e, argv, id) }
	}
	return clientImpl{name: name, available: available, scenarios: s}
}

type scriptResult struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
}

func runScript(ctx context.Context, e *env, argv []string, id string) (string, error) {
	args := append(append([]string(nil), argv[1:]...), "--bootstrap", e.addr, "--strict", e.strict, "--scenario", id, "--topic", e.topic(id))
	cmd := exec.CommandContext(ctx, argv[0], args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res scriptResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		return "", fmt.Errorf("%s %s printed no result (%v, exit %v): %s", filepath.Base(argv[len(argv)-1]), id, err, runErr, lastLines(stderr.Bytes(), 4))
	}
	switch res.Status {
	case "pass":
		return res.Reason, nil
	case "n/a":
		return "", notApplicable(res.Reason)
	}
	return "", fmt.Errorf("%s", res.Reason)
}
