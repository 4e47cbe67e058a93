// Package hostile holds the attacker's side of Vigil's hostile-input checks
// (issue #30; the tests and vigil-bench hostile): a UDP flood from one
// sender (Flood), datagrams with a forged source address (Spoofer), and
// the capture of a port's datagrams on a network device (Capture), to
// replay them. Traffic goes only to loopback and the tests' network
// namespaces.
package hostile
