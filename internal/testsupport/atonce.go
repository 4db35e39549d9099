package testsupport

import "sync"

// AtOnce calls f(0) to f(n-1) from n goroutines released together, so the
// calls contend as much as the scheduler lets them, and returns when all
// have returned. f counts or collects its own results (safely for
// concurrent calls).
func AtOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			f(i)
		})
	}
	close(start)
	wg.Wait()
}
