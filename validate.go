package pagpolar

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/pagpolar/pagpolar-go/internal/wire"
)

// Local validation runs before anything is saved or sent. Limits the API
// does not document are generous on purpose: the API stays the authority,
// these only catch mistakes that would otherwise cost a stored operation.

// One limit for operation IDs everywhere: every ID the SDK accepts or
// derives ("credit_card:" + a 255-byte reference) can be resumed.
const (
	maxReference   = 255
	maxOperationID = 300
)

func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return &ValidationError{Field: field, Reason: "required"}
	}
	return nil
}

// identifier checks an ID the API or the store will see: present, at most
// max bytes, valid UTF-8 (a byte the API would read as U+FFFD could never be
// looked up again), and without spaces or control characters.
func identifier(field, v string, max int) error {
	if err := required(field, v); err != nil {
		return err
	}
	if len(v) > max {
		return &ValidationError{Field: field, Reason: "longer than " + strconv.Itoa(max) + " bytes"}
	}
	if !utf8.ValidString(v) {
		return &ValidationError{Field: field, Reason: "not valid UTF-8"}
	}
	for _, r := range v {
		if unicode.IsControl(r) || unicode.IsSpace(r) || r == utf8.RuneError {
			return &ValidationError{Field: field, Reason: "must not contain spaces, control characters or U+FFFD"}
		}
	}
	return nil
}

func validateOperationID(v string, needed bool) error {
	if v == "" && !needed {
		return nil
	}
	if v == "" {
		return &ValidationError{Field: "OperationID", Reason: "required: give each refund / plan change a stable ID from your own records (e.g. \"refund-<your refund row id>\")"}
	}
	return identifier("OperationID", v, maxOperationID)
}

func validateCustomer(c Customer) error {
	if err := required("Customer.Name", c.Name); err != nil {
		return err
	}
	if err := required("Customer.Email", c.Email); err != nil {
		return err
	}
	at := strings.LastIndexByte(c.Email, '@')
	if at < 1 || at == len(c.Email)-1 || strings.ContainsAny(c.Email, " \t\r\n") {
		return &ValidationError{Field: "Customer.Email", Reason: "not an e-mail address"}
	}
	// The document may be empty: the API's own PIX example sends
	// "document": "" (CONTRACT.md). When given it must be a CPF or CNPJ.
	if c.Document != "" {
		if n := digits(c.Document); n != 11 && n != 14 {
			return &ValidationError{Field: "Customer.Document", Reason: "want a CPF (11 digits) or CNPJ (14 digits), or empty"}
		}
	}
	if c.Phone != "" {
		if n := digits(c.Phone); n < 10 || n > 13 {
			return &ValidationError{Field: "Customer.Phone", Reason: "want 10 to 13 digits with area code"}
		}
	}
	return nil
}

// digits counts digits, or returns -1 if s has anything but digits and
// common punctuation.
func digits(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			n++
		case strings.ContainsRune(".-/() +", r):
		default:
			return -1
		}
	}
	return n
}

func validateMethod(field, m string) error {
	switch m {
	case wire.MethodPix, wire.MethodBoleto, wire.MethodCreditCard:
		return nil
	}
	return &ValidationError{Field: field, Reason: "want one of pix, boleto, credit_card"}
}
