package ordering

import (
	"testing"
	"unsafe"
)

// TestItemSize pins the memory an Item takes, which a request waiting in a
// heap-ordered queue of the flow controller holds beside its waiter: at most
// 144 bytes, the size class it takes, so that the two stay within what the
// waiter alone took when it embedded its item (416 bytes). The key and the
// arrival order of a queued item live in the heap's entries, not in it.
func TestItemSize(t *testing.T) {
	if size := unsafe.Sizeof(Item{}); size > 144 {
		t.Errorf("Item is %d bytes, past the 144-byte size class", size)
	}
}
