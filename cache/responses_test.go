package cache

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/switchboard-ai/switchboard/runtime"
)

// responseStore is what the gateway needs of a store for stored responses.
type responseStore interface {
	PutResponse(ctx context.Context, principal, id string, record []byte) error
	GetResponse(ctx context.Context, principal, id string) ([]byte, error)
	DeleteResponse(ctx context.Context, principal, id string) error
}

var (
	_ responseStore = (*Memory)(nil)
	_ responseStore = (*Redis)(nil)
)

func TestMemoryResponses(t *testing.T) {
	testResponses(t, func(ttl time.Duration) responseStore {
		s := NewMemory(Options{SessionTTL: ttl})
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestRedisResponses(t *testing.T) {
	u := testRedisURL(t)
	testResponses(t, func(ttl time.Duration) responseStore {
		return openRedis(t, Options{URL: u, SessionTTL: ttl})
	})
}

// testResponses checks a backend's stored responses: round trip, overwrite,
// delete, isolation per principal and expiry after the session TTL.
func testResponses(t *testing.T, open func(ttl time.Duration) responseStore) {
	ctx := context.Background()
	s := open(time.Minute)
	p, other := "resp-test-"+rand.Text(), "resp-test-"+rand.Text()
	id := "resp_" + rand.Text()
	t.Cleanup(func() { _ = s.DeleteResponse(ctx, p, id) })

	if _, err := s.GetResponse(ctx, p, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Get of an absent record: %v, want ErrNotFound", err)
	}
	rec := []byte(`{"session":"s1","version":3}`)
	if err := s.PutResponse(ctx, p, id, rec); err != nil {
		t.Fatalf("Put: %v", err)
	}
	rec[2] = 'X' // the store keeps its own copy
	got, err := s.GetResponse(ctx, p, id)
	if err != nil || string(got) != `{"session":"s1","version":3}` {
		t.Fatalf("Get: %q, %v", got, err)
	}
	if _, err := s.GetResponse(ctx, other, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("another principal read the record: %v", err)
	}
	if err := s.DeleteResponse(ctx, other, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("another principal deleted the record: %v", err)
	}
	if err := s.PutResponse(ctx, p, id, []byte(`{"v":2}`)); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if got, _ := s.GetResponse(ctx, p, id); string(got) != `{"v":2}` {
		t.Fatalf("after overwrite: %q", got)
	}
	if err := s.DeleteResponse(ctx, p, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.GetResponse(ctx, p, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := s.DeleteResponse(ctx, p, id); !errors.Is(err, runtime.ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}

	short := open(100 * time.Millisecond)
	if err := short.PutResponse(ctx, p, id, []byte(`{}`)); err != nil {
		t.Fatalf("Put: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := short.GetResponse(ctx, p, id)
		if errors.Is(err, runtime.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("record still there long after the TTL: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
