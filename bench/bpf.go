package bench

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

func mountTracefs() error { return unix.Mount("tracefs", tracefs, "tracefs", 0, "") }

// bpfSched is the eBPF side of SchedWatch: two tracepoint programs written
// with cilium/ebpf's asm package (no compiler needed).
//
// sched_switch(prev → next), for tracked threads only (map cls: tid → class):
//   - prev a detector thread: if this CPU's steal mark is set, counters[1]
//     += now − steal and the mark is cleared; if prev is the emitter and was
//     preempted (prev_state == TASK_RUNNING), wake[prev] = now;
//   - next a detector thread and prev an application thread preempted for
//     it: counters[0]++ and this CPU's steal mark = now (the application
//     waits from now until the detector thread leaves the CPU);
//   - next the emitter with wake[next] set: hist[log2(now − wake[next])]++
//     and wake[next] = 0.
//
// sched_wakeup(pid): if pid is the emitter, wake[pid] = now.
type bpfSched struct {
	cls, wake, steal, hist, counters *ebpf.Map
	progs                            []*ebpf.Program
	links                            []link.Link
}

type bpfResult struct {
	Preemptions, StolenNs uint64
	EmitterRunq           Log2Hist
}

func startBPFSched(classes map[[2]int]uint32) (b *bpfSched, err error) {
	if err := ensureTracefs(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("BPF not permitted (memlock): %w", err)
	}
	off := map[string]int16{}
	for _, f := range []struct{ tp, field string }{
		{"sched_switch", "prev_pid"}, {"sched_switch", "prev_state"}, {"sched_switch", "next_pid"}, {"sched_wakeup", "pid"},
	} {
		o, err := tracepointOffset("sched", f.tp, f.field)
		if err != nil {
			return nil, fmt.Errorf("tracepoint sched/%s: %w", f.tp, err)
		}
		off[f.tp+"."+f.field] = o
	}
	b = &bpfSched{}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	n := uint32(max(len(classes), 1) * 2)
	mk := func(typ ebpf.MapType, val, entries uint32) (*ebpf.Map, error) {
		return ebpf.NewMap(&ebpf.MapSpec{Type: typ, KeySize: 4, ValueSize: val, MaxEntries: entries})
	}
	for _, m := range []struct {
		p       **ebpf.Map
		typ     ebpf.MapType
		val, nr uint32
	}{
		{&b.cls, ebpf.Hash, 4, n}, {&b.wake, ebpf.Hash, 8, n}, {&b.steal, ebpf.PerCPUArray, 8, 1},
		{&b.hist, ebpf.Array, 8, 64}, {&b.counters, ebpf.Array, 8, 2},
	} {
		if *m.p, err = mk(m.typ, m.val, m.nr); err != nil {
			return b, fmt.Errorf("creating a BPF map: %w", err)
		}
	}
	for pt, c := range classes {
		tid := uint32(pt[1])
		if err := b.cls.Put(tid, c); err != nil {
			return b, err
		}
	}
	for _, p := range []struct {
		name  string
		insns asm.Instructions
	}{
		{"sched_switch", b.switchProg(off["sched_switch.prev_pid"], off["sched_switch.prev_state"], off["sched_switch.next_pid"])},
		{"sched_wakeup", b.wakeupProg(off["sched_wakeup.pid"])},
	} {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "vigil_" + p.name[6:], Type: ebpf.TracePoint,
			Instructions: p.insns, License: "GPL"})
		if err != nil {
			return b, fmt.Errorf("loading the BPF %s program: %w", p.name, err)
		}
		b.progs = append(b.progs, prog)
		l, err := link.Tracepoint("sched", p.name, prog, nil)
		if err != nil {
			return b, fmt.Errorf("attaching to sched/%s: %w", p.name, err)
		}
		b.links = append(b.links, l)
	}
	return b, nil
}

// Stack slots of the programs.
const (
	fpKey = -4  // u32 map key (a tid)
	fpIdx = -8  // u32 array index
	fpVal = -16 // u64 map value
)

// lookup emits r0 = map_lookup_elem(m, fp+key).
func lookup(m *ebpf.Map, key int32) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, key),
		asm.FnMapLookupElem.Call(),
	}
}

// update emits map_update_elem(m, fp+fpKey, fp+fpVal, BPF_ANY).
func update(m *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, fpKey),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, fpVal),
		asm.Mov.Imm(asm.R4, 0),
		asm.FnMapUpdateElem.Call(),
	}
}

// switchProg: R6 = ctx, R7 = now, R8 = prev's class (0: untracked),
// R9 = next's class.
func (b *bpfSched) switchProg(prevPid, prevState, nextPid int16) asm.Instructions {
	var p asm.Instructions
	add := func(is ...asm.Instruction) { p = append(p, is...) }
	addAll := func(is asm.Instructions) { p = append(p, is...) }
	index := func(i int32) { add(asm.Mov.Imm(asm.R1, i), asm.StoreMem(asm.RFP, fpIdx, asm.R1, asm.Word)) }

	add(asm.Mov.Reg(asm.R6, asm.R1), asm.FnKtimeGetNs.Call(), asm.Mov.Reg(asm.R7, asm.R0), asm.Mov.Imm(asm.R8, 0))
	// prev
	add(asm.LoadMem(asm.R1, asm.R6, prevPid, asm.Word), asm.StoreMem(asm.RFP, fpKey, asm.R1, asm.Word))
	addAll(lookup(b.cls, fpKey))
	add(asm.JEq.Imm(asm.R0, 0, "next"), asm.LoadMem(asm.R8, asm.R0, 0, asm.Word),
		asm.JEq.Imm(asm.R8, int32(classApp), "next"))
	// a detector thread leaves the CPU: close the stolen interval, if any
	index(0)
	addAll(lookup(b.steal, fpIdx))
	add(asm.JEq.Imm(asm.R0, 0, "prevwake"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "prevwake"),
		asm.Mov.Imm(asm.R2, 0), asm.StoreMem(asm.R0, 0, asm.R2, asm.DWord),
		asm.Mov.Reg(asm.R9, asm.R7), asm.Sub.Reg(asm.R9, asm.R1))
	index(1)
	addAll(lookup(b.counters, fpIdx))
	add(asm.JEq.Imm(asm.R0, 0, "prevwake"), asm.StoreXAdd(asm.R0, asm.R9, asm.DWord))
	// the emitter preempted: it is runnable from now on
	add(asm.JNE.Imm(asm.R8, int32(classEmitter), "next").WithSymbol("prevwake"),
		asm.LoadMem(asm.R1, asm.R6, prevState, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "next"),
		asm.StoreMem(asm.RFP, fpVal, asm.R7, asm.DWord))
	addAll(update(b.wake))
	// next
	add(asm.LoadMem(asm.R1, asm.R6, nextPid, asm.Word).WithSymbol("next"), asm.StoreMem(asm.RFP, fpKey, asm.R1, asm.Word))
	addAll(lookup(b.cls, fpKey))
	add(asm.JEq.Imm(asm.R0, 0, "out"), asm.LoadMem(asm.R9, asm.R0, 0, asm.Word))
	// an application thread preempted for a detector thread: count it and
	// open a stolen interval on this CPU
	add(asm.JNE.Imm(asm.R8, int32(classApp), "emit"),
		asm.JEq.Imm(asm.R9, int32(classApp), "emit"),
		asm.LoadMem(asm.R1, asm.R6, prevState, asm.DWord),
		asm.JNE.Imm(asm.R1, 0, "emit"))
	index(0)
	addAll(lookup(b.counters, fpIdx))
	add(asm.JEq.Imm(asm.R0, 0, "emit"), asm.Mov.Imm(asm.R1, 1), asm.StoreXAdd(asm.R0, asm.R1, asm.DWord))
	index(0)
	addAll(lookup(b.steal, fpIdx))
	add(asm.JEq.Imm(asm.R0, 0, "emit"), asm.StoreMem(asm.R0, 0, asm.R7, asm.DWord))
	// the emitter runs: its run-queue latency
	add(asm.JNE.Imm(asm.R9, int32(classEmitter), "out").WithSymbol("emit"))
	addAll(lookup(b.wake, fpKey))
	add(asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.DWord),
		asm.JEq.Imm(asm.R1, 0, "out"),
		asm.Mov.Imm(asm.R2, 0), asm.StoreMem(asm.R0, 0, asm.R2, asm.DWord),
		asm.Mov.Reg(asm.R3, asm.R7), asm.Sub.Reg(asm.R3, asm.R1),
		asm.Mov.Imm(asm.R4, 0))
	// R4 = floor(log2(R3)), unrolled
	for _, sh := range []int32{32, 16, 8, 4, 2, 1} {
		l := fmt.Sprintf("log%d", sh)
		add(asm.Mov.Reg(asm.R5, asm.R3), asm.RSh.Imm(asm.R5, sh), asm.JEq.Imm(asm.R5, 0, l),
			asm.Add.Imm(asm.R4, sh), asm.Mov.Reg(asm.R3, asm.R5),
			asm.Mov.Imm(asm.R5, 0).WithSymbol(l))
	}
	add(asm.StoreMem(asm.RFP, fpIdx, asm.R4, asm.Word))
	addAll(lookup(b.hist, fpIdx))
	add(asm.JEq.Imm(asm.R0, 0, "out"), asm.Mov.Imm(asm.R1, 1), asm.StoreXAdd(asm.R0, asm.R1, asm.DWord))
	add(asm.Mov.Imm(asm.R0, 0).WithSymbol("out"), asm.Return())
	return p
}

func (b *bpfSched) wakeupProg(pid int16) asm.Instructions {
	p := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R1, asm.R6, pid, asm.Word),
		asm.StoreMem(asm.RFP, fpKey, asm.R1, asm.Word),
	}
	p = append(p, lookup(b.cls, fpKey)...)
	p = append(p,
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.JNE.Imm(asm.R1, int32(classEmitter), "out"),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(asm.RFP, fpVal, asm.R0, asm.DWord))
	p = append(p, update(b.wake)...)
	return append(p, asm.Mov.Imm(asm.R0, 0).WithSymbol("out"), asm.Return())
}

func (b *bpfSched) read() (bpfResult, error) {
	var r bpfResult
	for k := range uint32(64) {
		if err := b.hist.Lookup(k, &r.EmitterRunq[k]); err != nil {
			return r, err
		}
	}
	if err := b.counters.Lookup(uint32(0), &r.Preemptions); err != nil {
		return r, err
	}
	err := b.counters.Lookup(uint32(1), &r.StolenNs)
	return r, err
}

func (b *bpfSched) close() {
	var errs []error
	for _, l := range b.links {
		errs = append(errs, l.Close())
	}
	for _, p := range b.progs {
		errs = append(errs, p.Close())
	}
	for _, m := range []*ebpf.Map{b.cls, b.wake, b.steal, b.hist, b.counters} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	_ = errors.Join(errs...)
}
