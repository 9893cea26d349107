package upstream

import "context"

// One typed method per operation of the open API, each a thin wrapper over Call: the
// operation ids and parameter names are the contract's, and everything else (method, path,
// retry safety, idempotency key) is looked up there.

// call performs one operation and decodes its answer into a new T.
func call[T any](ctx context.Context, c *Client, operationID string, params map[string]string, body any) (*T, error) {
	var out T
	if err := c.Call(ctx, operationID, params, body, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetMe returns the signed-in user (getMe).
func (c *Client) GetMe(ctx context.Context) (*Me, error) {
	return call[Me](ctx, c, "getMe", nil, nil)
}

// CreateCard creates an empty private card (createCard) and returns it with the idempotency
// key the request carried: in.IdempotencyKey, or a fresh one when that is empty. Retries
// carry the same key, and so may a later call that repeats the create.
func (c *Client) CreateCard(ctx context.Context, in CardCreateInput) (*CardCreated, string, error) {
	if in.IdempotencyKey == "" {
		in.IdempotencyKey = NewIdempotencyKey()
	}
	out, err := call[CardCreated](ctx, c, "createCard", nil, in)
	return out, in.IdempotencyKey, err
}

// GetCard returns a card's detail (getCard).
func (c *Client) GetCard(ctx context.Context, roleID string) (*Card, error) {
	return call[Card](ctx, c, "getCard", map[string]string{"roleId": roleID}, nil)
}

// SetOpeningLines sets a card's first message, alternates and prologue (setOpeningLines).
func (c *Client) SetOpeningLines(ctx context.Context, roleID string, in OpeningLinesInput) (*RoleSaved, error) {
	return call[RoleSaved](ctx, c, "setOpeningLines", map[string]string{"roleId": roleID}, in)
}

// UpdateCardProfile updates a card's basic profile and returns the card (updateCardProfile).
func (c *Client) UpdateCardProfile(ctx context.Context, roleID string, in CardProfileInput) (*Card, error) {
	return call[Card](ctx, c, "updateCardProfile", map[string]string{"roleId": roleID}, in)
}

// WriteCardDocument writes a card's text sections as one document (writeCardDocument).
func (c *Client) WriteCardDocument(ctx context.Context, roleID string, in CardDocumentInput) (*RoleSaved, error) {
	return call[RoleSaved](ctx, c, "writeCardDocument", map[string]string{"roleId": roleID}, in)
}

// SetCardVisibility sets a card's visibility (setCardVisibility).
func (c *Client) SetCardVisibility(ctx context.Context, roleID string, in VisibilityInput) (*VisibilityResult, error) {
	return call[VisibilityResult](ctx, c, "setCardVisibility", map[string]string{"roleId": roleID}, in)
}

// ValidateCard returns the report shown before publishing (validateCard).
func (c *Client) ValidateCard(ctx context.Context, roleID string) (*ValidationReport, error) {
	return call[ValidationReport](ctx, c, "validateCard", map[string]string{"roleId": roleID}, nil)
}

// PublishCard submits a card for review (publishCard).
func (c *Client) PublishCard(ctx context.Context, roleID string) (*PublishResult, error) {
	return call[PublishResult](ctx, c, "publishCard", map[string]string{"roleId": roleID}, PublishInput{})
}

// UploadImage uploads an avatar or background image (uploadImage).
func (c *Client) UploadImage(ctx context.Context, in ImageUploadInput) (*ImageUploaded, error) {
	return call[ImageUploaded](ctx, c, "uploadImage", nil, in)
}

// ListCardAssets lists the images of a card's author page (listCardAssets).
func (c *Client) ListCardAssets(ctx context.Context, roleID string) (*CardAssets, error) {
	return call[CardAssets](ctx, c, "listCardAssets", map[string]string{"roleId": roleID}, nil)
}

// ListWorldbooks lists the author's worldbooks (listWorldbooks).
func (c *Client) ListWorldbooks(ctx context.Context) (*WorldbookList, error) {
	return call[WorldbookList](ctx, c, "listWorldbooks", nil, nil)
}

// CreateWorldbook creates a worldbook (createWorldbook).
func (c *Client) CreateWorldbook(ctx context.Context, in WorldbookCreateInput) (*WorldbookCreated, error) {
	return call[WorldbookCreated](ctx, c, "createWorldbook", nil, in)
}

// GetWorldbook returns a worldbook's metadata (getWorldbook).
func (c *Client) GetWorldbook(ctx context.Context, worldbookID string) (*Worldbook, error) {
	return call[Worldbook](ctx, c, "getWorldbook", map[string]string{"worldbookId": worldbookID}, nil)
}

// ListCardWorldbooks lists the worldbooks bound to a card (listCardWorldbooks).
func (c *Client) ListCardWorldbooks(ctx context.Context, roleID string) (*BoundWorldbooks, error) {
	return call[BoundWorldbooks](ctx, c, "listCardWorldbooks", map[string]string{"roleId": roleID}, nil)
}

// ListWorldbookEntries lists a worldbook's entries, only those of category when it is not ""
// (listWorldbookEntries).
func (c *Client) ListWorldbookEntries(ctx context.Context, worldbookID, category string) (*WorldbookEntryList, error) {
	params := map[string]string{"worldbookId": worldbookID}
	if category != "" {
		params["category"] = category
	}
	return call[WorldbookEntryList](ctx, c, "listWorldbookEntries", params, nil)
}

// WriteWorldbookDocument writes a worldbook's metadata, entries and binding as one document
// (writeWorldbookDocument); it is not retried once the request may have been processed.
func (c *Client) WriteWorldbookDocument(ctx context.Context, worldbookID string, in WorldbookDocumentInput) (*WorldbookDocumentResult, error) {
	return call[WorldbookDocumentResult](ctx, c, "writeWorldbookDocument", map[string]string{"worldbookId": worldbookID}, in)
}

// ListTrialCards lists the client's live trial cards, slots and lifetime (listTrialCards).
func (c *Client) ListTrialCards(ctx context.Context) (*TrialList, error) {
	return call[TrialList](ctx, c, "listTrialCards", nil, nil)
}

// GetTrialCard returns one trial card (getTrialCard).
func (c *Client) GetTrialCard(ctx context.Context, clientKey string) (*TrialSummary, error) {
	return call[TrialSummary](ctx, c, "getTrialCard", map[string]string{"clientKey": clientKey}, nil)
}

// UpsertTrialCard creates or updates the trial card named clientKey (upsertTrialCard).
func (c *Client) UpsertTrialCard(ctx context.Context, clientKey string, in TrialUpsertInput) (*TrialSummary, error) {
	return call[TrialSummary](ctx, c, "upsertTrialCard", map[string]string{"clientKey": clientKey}, in)
}

// DeleteTrialCard removes a trial card now (deleteTrialCard).
func (c *Client) DeleteTrialCard(ctx context.Context, clientKey string) (*TrialRemoved, error) {
	return call[TrialRemoved](ctx, c, "deleteTrialCard", map[string]string{"clientKey": clientKey}, nil)
}
