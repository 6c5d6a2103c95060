package server

import (
	"sort"
	"strconv"

	"gorm.io/gorm"
)

// Page selects one page of a list: the entries after the cursor After —
// the key of the last entry of the previous page, "" for the first page —
// and at most Limit of them (0: all). Lists ordered by name key their
// entries by name ("app/name" across apps); lists ordered newest first key
// them by id. The API hands the key out as an opaque cursor.
type Page struct {
	After string
	Limit int
}

// Page sizes of the API's lists.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// limit asks q for one entry more than the page holds, so Cut can tell
// whether another page follows.
func (pg Page) limit(q *gorm.DB) *gorm.DB {
	if pg.Limit > 0 {
		q = q.Limit(pg.Limit + 1)
	}
	return q
}

// ByName orders q by the column col and narrows it to the page: names
// after After.
func (pg Page) ByName(q *gorm.DB, col string) *gorm.DB {
	if pg.After != "" {
		q = q.Where(col+" > ?", pg.After)
	}
	return pg.limit(q.Order(col))
}

// Newest orders q by the column col (an id or a number), highest first,
// and narrows it to the page: keys below After. A cursor that is not a
// key of such a list is refused, naming "cursor".
func (pg Page) Newest(q *gorm.DB, col string) (*gorm.DB, error) {
	return pg.byNumber(q, col, "<", " DESC")
}

// Oldest is Newest the other way round: lowest first, keys above After.
func (pg Page) Oldest(q *gorm.DB, col string) (*gorm.DB, error) {
	return pg.byNumber(q, col, ">", "")
}

func (pg Page) byNumber(q *gorm.DB, col, after, order string) (*gorm.DB, error) {
	id, err := pg.AfterID()
	if err != nil {
		return nil, err
	}
	if id > 0 {
		q = q.Where(col+" "+after+" ?", id)
	}
	return pg.limit(q.Order(col + order)), nil
}

// AfterID is After as the key of a list ordered by id, newest first: 0
// for the first page.
func (pg Page) AfterID() (int64, error) {
	if pg.After == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(pg.After, 10, 64)
	if err != nil || id < 1 {
		return 0, invalid("cursor", "is not a cursor of this list; pass the next_cursor of its previous page")
	}
	return id, nil
}

// Cut trims list, read with Page.limit, to the page and returns the
// cursor of the next page: the key of the page's last entry, "" when no
// entry follows.
func Cut[T any](list []T, pg Page, key func(*T) string) ([]T, string) {
	if pg.Limit <= 0 || len(list) <= pg.Limit {
		return list, ""
	}
	list = list[:pg.Limit]
	return list, key(&list[pg.Limit-1])
}

// CutSorted pages a list held whole in memory, ordered by key: the
// entries after After, cut to the page (see Cut).
func CutSorted[T any](list []T, pg Page, key func(*T) string) ([]T, string) {
	from := sort.Search(len(list), func(i int) bool { return key(&list[i]) > pg.After })
	return Cut(list[from:], pg, key)
}

// IDKey is the cursor key of an entry of a list ordered by id.
func IDKey(id int64) string { return strconv.FormatInt(id, 10) }
