package tools

import (
	"crypto/hmac"
	"encoding/json"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// DownloadHandler serves the download URLs of large exports (GET DownloadPath + ID + "." +
// signature) to a browser: the file with Content-Disposition attachment, while it has not
// expired and the signature is the one made for its owner. It reads what the server with the
// same Options keeps (Exports, and State or SigningKey for the key); any other request is a
// 404 that says nothing of which exports exist.
func DownloadHandler(opts Options) http.Handler {
	state := opts.stateStore()
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	x := newExports(opts, nil, nil, log, newSigner(opts.SigningKey, state))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "private, no-store")
		w.Header().Set("Referrer-Policy", "no-referrer")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method not allowed.", http.StatusMethodNotAllowed)
			return
		}
		rec, ok := x.download(r)
		if !ok {
			http.Error(w, "This download link is wrong or has expired. Export the file again for a new link.", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", rec.MIMEType)
		w.Header().Set("Content-Length", strconv.Itoa(len(rec.Data)))
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": rec.Name}))
		if r.Method == http.MethodGet {
			_, _ = w.Write(rec.Data)
		}
	})
}

// download returns the export a download URL names, when its signature is good for the
// export's owner and expiry and it has not expired.
func (x *exports) download(r *http.Request) (exportRecord, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, DownloadPath)
	if !ok {
		return exportRecord{}, false
	}
	id, sig, ok := strings.Cut(rest, ".")
	if !ok || len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
		return exportRecord{}, false
	}
	raw, err := x.kv.Get(r.Context(), exportKeyPrefix+id)
	if err != nil {
		return exportRecord{}, false
	}
	var rec exportRecord
	if json.Unmarshal(raw, &rec) != nil || !x.now().Before(rec.Expires) {
		return exportRecord{}, false
	}
	want, err := x.downloadSig(r.Context(), id, rec)
	if err != nil {
		x.log.LogAttrs(r.Context(), slog.LevelError, "download not served", slog.String("err", err.Error()))
		return exportRecord{}, false
	}
	return rec, hmac.Equal([]byte(sig), []byte(want))
}
