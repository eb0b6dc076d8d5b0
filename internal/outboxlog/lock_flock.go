//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package outboxlog

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockPatience is how long lockDir retries a lock held elsewhere: a
// process that starts a child (os/exec) lends it every open file until the
// child's exec closes them, so a lock this process has just dropped can
// still be held, for that instant, through the child.
const lockPatience = 100 * time.Millisecond

// lockDir takes an exclusive flock on the directory's LOCK file, waiting
// at most lockPatience. A flock belongs to the open file description: a
// second Open of the same directory conflicts, in this process or
// another, and the kernel drops the lock when the process dies, however
// it dies.
func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(lockPath(dir), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("outboxlog: lock %s: %w", dir, err)
	}
	deadline := time.Now().Add(lockPatience)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if !errors.Is(err, unix.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
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
