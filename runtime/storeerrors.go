package runtime

import (
	"errors"
	"fmt"
)

// Errors a Store returns, wrapped, for the limits and damage of CONTRACT
// §14.
var (
	// ErrSessionTooLarge is a save that would make the stored transcript
	// larger than the store's max_session_bytes; nothing was written.
	ErrSessionTooLarge = errors.New("session too large")
	// ErrSessionCorrupt is a stored session whose records cannot be
	// decoded. It is not the store being down: retrying will not help.
	ErrSessionCorrupt = errors.New("session corrupt")
)

// SessionCorruptError says which session cannot be read, and why. It
// matches ErrSessionCorrupt.
type SessionCorruptError struct {
	// ID is the session id as the client named it.
	ID string
	// Reason says what in the stored records is wrong.
	Reason string
}

// Error reads like `session s1 is corrupt: version "x" is not a number`.
func (e *SessionCorruptError) Error() string {
	return fmt.Sprintf("session %s is corrupt: %s", e.ID, e.Reason)
}

// Is makes errors.Is(err, ErrSessionCorrupt) hold.
func (e *SessionCorruptError) Is(target error) bool { return target == ErrSessionCorrupt }
