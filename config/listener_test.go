package config

import (
	"maps"
	"testing"
)

func TestParseListener(t *testing.T) {
	tests := []struct {
		in   string
		want Listener
		str  string
	}{
		{"PLAINTEXT://localhost:9092", Listener{"PLAINTEXT", "localhost", 9092}, "PLAINTEXT://localhost:9092"},
		{"CONTROLLER://:9093", Listener{"CONTROLLER", "", 9093}, "CONTROLLER://:9093"},
		{"plaintext://127.0.0.1:0", Listener{"PLAINTEXT", "127.0.0.1", 0}, "PLAINTEXT://127.0.0.1:0"},
		{"PLAINTEXT://[::1]:9092", Listener{"PLAINTEXT", "::1", 9092}, "PLAINTEXT://[::1]:9092"},
		{"EXTERNAL://[fe80::1%eth0]:19092", Listener{"EXTERNAL", "fe80::1%eth0", 19092}, "EXTERNAL://[fe80::1%eth0]:19092"},
		{"PLAINTEXT://::1:9092", Listener{"PLAINTEXT", "::1", 9092}, "PLAINTEXT://[::1]:9092"},
		{"PLAINTEXT://[::]:9092", Listener{"PLAINTEXT", "::", 9092}, "PLAINTEXT://[::]:9092"},
		{"Internal_1://broker-1.example.com:65535", Listener{"INTERNAL_1", "broker-1.example.com", 65535}, "INTERNAL_1://broker-1.example.com:65535"},
	}
	for _, tt := range tests {
		got, err := ParseListener(tt.in)
		if err != nil {
			t.Errorf("ParseListener(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseListener(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if s := got.String(); s != tt.str {
			t.Errorf("ParseListener(%q).String() = %q, want %q", tt.in, s, tt.str)
		}
		again, err := ParseListener(got.String())
		if err != nil || again != got {
			t.Errorf("round trip of %q: %+v, %v", tt.in, again, err)
		}
	}
}

func TestParseListenerErrors(t *testing.T) {
	for _, in := range []string{
		"localhost:9092",
		"PLAINTEXT://localhost",
		"PLAINTEXT://localhost:",
		"://localhost:9092",
		"PLAINTEXT://localhost:65536",
		"PLAINTEXT://localhost:-1",
		"PLAINTEXT://local host:9092",
		"PLAINTEXT://localhost:9092/path",
		"",
	} {
		if got, err := ParseListener(in); err == nil {
			t.Errorf("ParseListener(%q) = %+v, want an error", in, got)
		}
	}
}

func TestParseListeners(t *testing.T) {
	got, err := ParseListeners(" PLAINTEXT://:9092 , CONTROLLER://localhost:9093 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{{"PLAINTEXT", "", 9092}, {"CONTROLLER", "localhost", 9093}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got, err := ParseListeners(""); err != nil || len(got) != 0 {
		t.Fatalf("ParseListeners(\"\") = %+v, %v; want empty", got, err)
	}
}

func TestCheckDistinct(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"A://:1,B://:2", true},
		{"A://:1,A://:2", false},
		{"A://:1,B://:1", false},
		{"A://127.0.0.1:1,B://[::1]:1", true},
		{"A://127.0.0.1:1,B://127.0.0.2:1", false},
		{"A://127.0.0.1:1,B://[::1]:1,C://:1", false},
		{"A://:0,B://:0", true},
	}
	for _, tt := range tests {
		ls, err := ParseListeners(tt.in)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkDistinct(ls); (err == nil) != tt.ok {
			t.Errorf("checkDistinct(%s) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

func TestParseVoters(t *testing.T) {
	got, err := parseVoters([]string{"1@localhost:9093", "2@[::1]:9094", "3@10.0.0.3:9093"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]string{1: "localhost:9093", 2: "[::1]:9094", 3: "10.0.0.3:9093"}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range [][]string{
		{"localhost:9093"},
		{"x@localhost:9093"},
		{"-1@localhost:9093"},
		{"1@localhost"},
		{"1@:9093"},
		{"1@0.0.0.0:9093"},
		{"1@a@b:1"},
		{"1@localhost:9093", "1@otherhost:9093"},
	} {
		if got, err := parseVoters(bad); err == nil {
			t.Errorf("parseVoters(%q) = %v, want an error", bad, got)
		}
	}
}
