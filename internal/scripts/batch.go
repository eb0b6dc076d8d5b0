package scripts

import "github.com/fleetstore/fleetstore/driver"

// Call is one call of a script and, once it ran, its reply (decoded into
// Go values: int64, string, nil, []any) or the client's error.
type Call struct {
	Keys, Args []string
	Reply      any
	Err        error
}

// SettleCalls returns one Settle call per group of claims, groups holding
// indices into claims (GroupByTenant's, or one group of them all).
func SettleCalls(keyPrefix string, commit bool, claims []driver.Claim, groups [][]int) []Call {
	calls := make([]Call, len(groups))
	for g, idx := range groups {
		batch := make([]driver.Claim, len(idx))
		for j, i := range idx {
			batch[j] = claims[i]
		}
		calls[g].Keys, calls[g].Args = SettleCall(keyPrefix, commit, batch)
	}
	return calls
}

// SettleErrors fans the results of calls (one per group, as SettleCalls
// built them) out to one error per claim of n. A group whose call failed
// gets failed(err) for every claim, one value for the group; a failure
// with the same text as the first group's shares its value, so that a
// failure of the whole batch is one value the Store says once. reached
// reports whether any call got a reply.
func SettleErrors(calls []Call, groups [][]int, n int, failed func(error) error) (errs []error, reached bool) {
	errs = make([]error, n)
	var whole error // failed(calls[0].Err), when the first call failed
	for g, idx := range groups {
		var res []error
		err := calls[g].Err
		switch {
		case err == nil:
			reached = true
			res, err = DecodeSettle(calls[g].Reply, len(idx))
		case whole != nil && err.Error() == calls[0].Err.Error():
			err = whole
		default:
			err = failed(err)
			if g == 0 {
				whole = err
			}
		}
		for j, i := range idx {
			if err != nil {
				errs[i] = err
			} else {
				errs[i] = res[j]
			}
		}
	}
	return errs, reached
}
