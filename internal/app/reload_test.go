package app

import (
	"slices"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/graphs"
)

// A reload keeps what only a restart can change, and names it.
func TestKeepRestartSettings(t *testing.T) {
	cur := &graphs.Set{
		Server:    graphs.Server{Listen: "127.0.0.1:8080", ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute, DrainTimeout: 30 * time.Second},
		Store:     graphs.Store{URL: "memory://", SessionTTL: time.Hour},
		Telemetry: graphs.Telemetry{ServiceName: "switchboard"},
	}
	next := &graphs.Set{
		Server:    graphs.Server{Listen: "0.0.0.0:9090", ReadTimeout: 5 * time.Second, IdleTimeout: time.Minute, DrainTimeout: 5 * time.Second},
		Store:     graphs.Store{URL: "redis://127.0.0.1:6379/0", SessionTTL: time.Hour},
		Telemetry: graphs.Telemetry{ServiceName: "other", CaptureContent: true},
	}
	got := keepRestartSettings(cur, next)
	want := []string{"server.listen", "server.read_timeout/idle_timeout", "store", "telemetry.service_name/otlp_endpoint"}
	if !slices.Equal(got, want) {
		t.Errorf("changed = %v, want %v", got, want)
	}
	if next.Server.Listen != cur.Server.Listen || next.Server.ReadTimeout != cur.Server.ReadTimeout || next.Store != cur.Store || next.Telemetry.ServiceName != "switchboard" {
		t.Errorf("restart settings not kept: %+v %+v %+v", next.Server, next.Store, next.Telemetry)
	}
	// What a reload may change stays as the new file says.
	if next.Server.DrainTimeout != 5*time.Second || !next.Telemetry.CaptureContent {
		t.Errorf("reloadable settings lost: %+v %+v", next.Server, next.Telemetry)
	}
	if got := keepRestartSettings(cur, cur); len(got) != 0 {
		t.Errorf("an unchanged config reports %v", got)
	}
}
