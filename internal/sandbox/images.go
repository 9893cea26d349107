package sandbox

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/gif"  // register GIF for image.DecodeConfig
	_ "image/jpeg" // register JPEG for image.DecodeConfig
	_ "image/png"  // register PNG for image.DecodeConfig
	"net/http"
	"strconv"

	_ "golang.org/x/image/webp" // register WebP for image.DecodeConfig
)

const (
	purposeAvatar     = "avatar"
	purposeBackground = "background"
	maxImageBytes     = 8 << 20 // 8 MiB decoded
)

// storedImage is an uploaded image with its bytes.
type storedImage struct {
	ID          string `json:"id"`
	Owner       string `json:"owner"`
	Seq         int64  `json:"seq"`
	Purpose     string `json:"purpose"`
	RoleID      string `json:"roleId,omitempty"`
	ContentType string `json:"contentType"`
	Width       int    `json:"width"`
	Height      int    `json:"height"`
	Data        []byte `json:"data"`
}

func (s *Service) imageURL(id string) string { return s.opts.BaseURL + imagesPrefix + id }

func (s *Service) uploadImage(rq *request) (int, any, error) {
	var in struct {
		Purpose     string  `json:"purpose"`
		RoleID      *string `json:"roleId"`
		ContentType string  `json:"contentType"`
		DataBase64  string  `json:"dataBase64"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	if in.RoleID != nil {
		if _, err := s.cardOf(rq.userID, *in.RoleID, map[string]any{"field": "roleId"}); err != nil {
			return 0, nil, err
		}
	}
	data, err := base64.StdEncoding.DecodeString(in.DataBase64)
	if err != nil {
		return 0, nil, errField("dataBase64", "The dataBase64 field is not valid standard base64.")
	}
	if len(data) > maxImageBytes {
		return 0, nil, newError(codePayloadTooLarge, "The image is larger than 8 MiB.",
			map[string]any{"limit": maxImageBytes, "size": len(data)})
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width < 1 || cfg.Height < 1 {
		return 0, nil, errField("dataBase64", "The uploaded bytes are not a PNG, JPEG, GIF or WebP image.")
	}
	detected := "image/" + format
	if detected != in.ContentType {
		return 0, nil, newError(codeInvalidRequest,
			"The contentType does not match the image, which is "+detected+".",
			map[string]any{"field": "contentType", "detected": detected})
	}
	id := newID("img_")
	for s.st.Images[id] != nil {
		id = newID("img_")
	}
	im := &storedImage{ID: id, Owner: rq.userID, Seq: s.st.nextSeq(), Purpose: in.Purpose,
		ContentType: detected, Width: cfg.Width, Height: cfg.Height, Data: data}
	if in.RoleID != nil {
		im.RoleID = *in.RoleID
	}
	s.st.Images[id] = im
	s.changed()
	return http.StatusCreated, struct {
		ImageID string `json:"imageId"`
		URL     string `json:"url"`
		Width   int    `json:"width"`
		Height  int    `json:"height"`
	}{id, s.imageURL(id), im.Width, im.Height}, nil
}

type assetView struct {
	ImageID string `json:"imageId"`
	Purpose string `json:"purpose"`
	URL     string `json:"url"`
}

func (s *Service) listCardAssets(rq *request) (int, any, error) {
	c, err := s.cardOf(rq.userID, rq.query["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	images := sortedBySeq(s.st.Images, func(im *storedImage) bool {
		return im.Owner == rq.userID && im.RoleID == c.ID
	}, func(im *storedImage) int64 { return im.Seq })
	out := make([]assetView, len(images))
	for i, im := range images {
		out[i] = assetView{im.ID, im.Purpose, s.imageURL(im.ID)}
	}
	return 0, struct {
		RoleID string      `json:"roleId"`
		Images []assetView `json:"images"`
	}{c.ID, out}, nil
}

// serveImage serves an image's bytes at /images/{imageId}, without auth, like a CDN.
func (s *Service) serveImage(w http.ResponseWriter, r *http.Request, rest string) int {
	segs, ok := splitPath(rest)
	if !ok || len(segs) != 1 {
		return s.writeError(w, nil, errNoRoute())
	}
	s.mu.Lock()
	im := s.st.Images[segs[0]]
	var ct string
	var data []byte
	if im != nil {
		ct, data = im.ContentType, im.Data // never mutated after upload
	}
	s.mu.Unlock()
	if im == nil {
		return s.writeError(w, nil, newError(codeNotFound, "No image with this imageId exists.", nil))
	}
	h := w.Header()
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
	return http.StatusOK
}
