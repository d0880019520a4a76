package main

import (
	"reflect"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/compat/harness"
)

func TestParseEvents(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       string
		want     map[string]harness.Status
		timedOut bool
	}{
		{
			name: "outcomes, subtests ignored",
			in: `{"Action":"run","Test":"TestA"}
{"Action":"pass","Test":"TestA"}
{"Action":"run","Test":"TestB"}
{"Action":"run","Test":"TestB/sub"}
{"Action":"fail","Test":"TestB/sub"}
{"Action":"fail","Test":"TestB"}
{"Action":"skip","Test":"TestC"}
not json
{"Action":"pass"}`,
			want: map[string]harness.Status{"TestA": harness.Pass, "TestB": harness.Fail, "TestC": harness.Skip},
		},
		{
			name: "timeout leaves the running test failed",
			in: `{"Action":"run","Test":"TestSlow"}
{"Action":"output","Test":"TestSlow","Output":"panic: test timed out after 8m0s\n"}`,
			want:     map[string]harness.Status{"TestSlow": harness.Fail},
			timedOut: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, timedOut := parseEvents(strings.NewReader(tc.in))
			if !reflect.DeepEqual(got, tc.want) || timedOut != tc.timedOut {
				t.Fatalf("got %v timedOut=%v, want %v %v", got, timedOut, tc.want, tc.timedOut)
			}
		})
	}
}
