package aside_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
	"github.com/cardwriter/cardwriter-mcp/internal/store"
	"github.com/cardwriter/cardwriter-mcp/internal/store/storetest"
)

func TestStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	newFile := func(t *testing.T) aside.Store {
		s, err := aside.NewFile(filepath.Join(t.TempDir(), "aside"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for name, mk := range map[string]func(*testing.T) aside.Store{
		"memory": func(*testing.T) aside.Store { return aside.NewMemory() },
		"file":   newFile,
		"kv":     func(*testing.T) aside.Store { return aside.NewKV(store.NewMemory()) },
		"redis": func(t *testing.T) aside.Store {
			kv, err := store.OpenRedis(storetest.Redis(t).URL())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { kv.Close() })
			return aside.NewKV(kv)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := mk(t)
			k := aside.Key{BaseURL: "https://api.example.com/open/v1", UserID: "u1", Kind: aside.KindCard, ID: "r_1"}
			if _, ok, err := s.Get(ctx, k); ok || err != nil {
				t.Fatalf("Get before Put: ok %v, err %v", ok, err)
			}
			if err := s.Put(ctx, k, []byte(`{"a":1}`)); err != nil {
				t.Fatal(err)
			}
			if err := s.Put(ctx, k, []byte(`{"a":2,"s":"龍 🐉"}`)); err != nil {
				t.Fatal(err)
			}
			got, ok, err := s.Get(ctx, k)
			if err != nil || !ok || string(got) != `{"a":2,"s":"龍 🐉"}` {
				t.Fatalf("Get = %s, %v, %v", got, ok, err)
			}
			// Every part of the key counts.
			for _, other := range []aside.Key{
				{BaseURL: "https://other.example.com/open/v1", UserID: "u1", Kind: aside.KindCard, ID: "r_1"},
				{BaseURL: k.BaseURL, UserID: "u2", Kind: aside.KindCard, ID: "r_1"},
				{BaseURL: k.BaseURL, UserID: "u1", Kind: aside.KindWorldbook, ID: "r_1"},
				{BaseURL: k.BaseURL, UserID: "u1", Kind: aside.KindCard, ID: "r_2"},
			} {
				if _, ok, err := s.Get(ctx, other); ok || err != nil {
					t.Errorf("%v: ok %v, err %v", other, ok, err)
				}
			}
			if err := s.Put(ctx, aside.Key{BaseURL: "x", UserID: "u"}, []byte(`{}`)); err == nil {
				t.Error("Put accepted an incomplete key")
			}
		})
	}
}

func TestFileStoreOnDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "config", "aside")
	s, err := aside.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := aside.Key{BaseURL: "http://sandbox.localhost/open/v1", UserID: "u_demo", Kind: aside.KindTrial, ID: "try-1"}
	if err := s.Put(ctx, k, []byte(`not json`)); err == nil {
		t.Error("Put accepted a record that is not JSON")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Put(ctx, k, []byte(`{"n":`+string(rune('0'+i))+`}`)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || !strings.HasSuffix(ents[0].Name(), ".json") {
		t.Fatalf("files %v, want one record and no temporary file", ents)
	}
	if runtime.GOOS != "windows" {
		fi, _ := os.Stat(dir)
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
		}
		fi, _ = os.Stat(filepath.Join(dir, ents[0].Name()))
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
		}
	}
	data, _ := os.ReadFile(filepath.Join(dir, ents[0].Name()))
	if !strings.Contains(string(data), `"id":"try-1"`) {
		t.Errorf("the file does not say whose it is: %s", data)
	}
	// Another store over the same directory (another process) reads it.
	s2, _ := aside.NewFile(dir)
	if got, ok, err := s2.Get(ctx, k); !ok || err != nil || !strings.HasPrefix(string(got), `{"n":`) {
		t.Errorf("second store: %s %v %v", got, ok, err)
	}
	// A damaged file is an error that says what to do.
	if err := os.WriteFile(filepath.Join(dir, ents[0].Name()), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s2.Get(ctx, k); err == nil || !strings.Contains(err.Error(), "delete it") {
		t.Errorf("damaged record: %v", err)
	}
	if _, err := aside.NewFile(""); err == nil {
		t.Error("NewFile accepted no directory")
	}
}

// A server that kept records in files moves them into its store once, and finds them there.
func TestImportDir(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "aside")
	files, err := aside.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := aside.Key{BaseURL: "https://api.example.com/open/v1", UserID: "u1", Kind: aside.KindCard, ID: "r_1"}
	if err := files.Put(ctx, k, []byte(`{"creator":"me"}`)); err != nil {
		t.Fatal(err)
	}
	kv := aside.NewKV(store.NewMemory())
	if n, err := aside.ImportDir(ctx, dir, kv); n != 1 || err != nil {
		t.Fatalf("import: %d %v", n, err)
	}
	if d, ok, err := kv.Get(ctx, k); !ok || err != nil || string(d) != `{"creator":"me"}` {
		t.Errorf("after import: %s %v %v", d, ok, err)
	}
	if _, err := os.Stat(dir + ".imported"); err != nil {
		t.Errorf("the directory was not renamed: %v", err)
	}
	if n, err := aside.ImportDir(ctx, dir, kv); n != 0 || err != nil {
		t.Errorf("second import: %d %v", n, err)
	}
}
