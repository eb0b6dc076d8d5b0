//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package outboxlog

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock on the directory's LOCK file, without
// waiting. A flock belongs to the open file description: a second Open of
// the same directory conflicts, in this process or another, and the
// kernel drops the lock when the process dies, however it dies.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(lockPath(dir), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("outboxlog: lock %s: %w", dir, err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("outboxlog: %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("outboxlog: lock %s: %w", dir, err)
	}
	return f, nil
}
