package natsembed

// Test-only views into a running server. They live here, compiled only
// into the package's tests, not in the production API.

// NumGateways returns how many gateway connections are up, outbound plus
// inbound (a full mesh of N regions has 2(N-1) on every server).
func (s *Server) NumGateways() int {
	out, in := s.gateways()
	n := len(out)
	for _, c := range in {
		n += c
	}
	return n
}
