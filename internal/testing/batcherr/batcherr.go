// Package batcherr splits the error of a batch Commit or Release into its
// claims' errors, for the tests of the drivers that batch them.
package batcherr

import (
	"errors"

	"github.com/fleetstore/fleetstore"
)

// Split returns err, a settle's error for n claims, as one error per
// claim (nil: none), by each *fleetstore.ClaimError's Index (CONTRACT
// C10). An error that is not one ClaimError per failed claim is the whole
// call's failure, returned as whole.
func Split(err error, n int) (errs []error, whole error) {
	errs = make([]error, n)
	if err == nil {
		return errs, nil
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil, err
	}
	for _, e := range joined.Unwrap() {
		var ce *fleetstore.ClaimError
		if !errors.As(e, &ce) || ce.Index < 0 || ce.Index >= n {
			return nil, err
		}
		errs[ce.Index] = ce.Err
	}
	return errs, nil
}
