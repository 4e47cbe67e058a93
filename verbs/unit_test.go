package verbs

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

// Tests that need no RDMA device.

// TestOpenErrors checks the errors of discovery: ErrNoDevice on a machine
// without RDMA, a clear error for an unknown device name otherwise.
func TestOpenErrors(t *testing.T) {
	if _, err := Devices(); !errors.Is(err, ErrNoDevice) {
		if err != nil {
			t.Fatalf("Devices: %v", err)
		}
		_, err := Open("no-such-device")
		if err == nil || !strings.Contains(err.Error(), `"no-such-device"`) {
			t.Errorf("Open(no-such-device) = %v", err)
		}
		return
	}
	_, err := Open("")
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("Open without a device = %v, want ErrNoDevice", err)
	}
	if !strings.Contains(err.Error(), "no RDMA device found") {
		t.Errorf("message %q", err)
	}
	if _, err := DeviceForNetdev("lo"); err == nil {
		t.Errorf("DeviceForNetdev(lo) without a device succeeded")
	}
}

func TestErrorsAndNames(t *testing.T) {
	err := newError("ibv_dealloc_pd", int(syscall.EBUSY))
	if !errors.Is(err, syscall.EBUSY) {
		t.Errorf("errors.Is(%v, EBUSY) is false", err)
	}
	if s := err.Error(); !strings.Contains(s, "ibv_dealloc_pd") || !strings.Contains(s, "errno 16") {
		t.Errorf("Error() = %q", s)
	}
	if s := newError("ibv_create_qp", 0).Error(); !strings.Contains(s, "errno 5") {
		t.Errorf("zero errno: %q, want EIO", s)
	}
	wce := &WCError{Op: "RDMA WRITE", Status: WCRemAccessErr}
	if s := wce.Error(); !strings.Contains(s, "remote access error") || !strings.Contains(s, "status 10") {
		t.Errorf("WCError = %q", s)
	}
	if MTU1024.Bytes() != 1024 || MTU4096.Bytes() != 4096 || MTU(0).Bytes() != 0 {
		t.Errorf("MTU.Bytes wrong")
	}
	if PortActive.String() != "active" {
		t.Errorf("PortActive = %q", PortActive.String())
	}
	if EventPortErr.String() != "port error" {
		t.Errorf("EventPortErr = %q", EventPortErr.String())
	}
	wc := WC{Status: WCRetryExcErr, Opcode: WCRDMAWrite}
	if err := wc.Err(); err == nil || !strings.Contains(err.Error(), "RDMA WRITE") {
		t.Errorf("WC.Err = %v", err)
	}
}

func TestGIDScore(t *testing.T) {
	v4 := GIDEntry{Type: GIDTypeRoCEv2, GID: GID{10: 0xff, 11: 0xff, 12: 10, 13: 99, 14: 0, 15: 1}}
	ll := GIDEntry{Type: GIDTypeRoCEv2, GID: GID{0: 0xfe, 1: 0x80, 15: 1}}
	g6 := GIDEntry{Type: GIDTypeRoCEv2, GID: GID{0: 0x20, 1: 0x01, 2: 0x0d, 3: 0xb8, 15: 1}}
	v1 := GIDEntry{Type: GIDTypeIB, GID: v4.GID}
	if !(gidScore(v4) > gidScore(g6) && gidScore(g6) > gidScore(ll) && gidScore(ll) > gidScore(v1)) {
		t.Errorf("scores v4 %d, v6 %d, link-local %d, v1 %d", gidScore(v4), gidScore(g6), gidScore(ll), gidScore(v1))
	}
	if v4.GID.String() != "10.99.0.1" {
		t.Errorf("GID.String = %s", v4.GID)
	}
}
