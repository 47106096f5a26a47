/* aioc's canonical JSON in C: the compiled twin of recstore/canonical.py's exact path.
 *
 * dumps(value) -> bytes, or None when the value holds something this encoder leaves to the
 * Python reference (a subclass of a JSON type, a non-str key, a type JSON never holds, or
 * nesting deeper than MAX_DEPTH): the caller then runs the Python path, which either prints
 * the value or raises exactly as it always did. The rules (docs/aioc-runrecord.md §2.2):
 *   - keys: "__proto__" dropped; array-index keys ("0", "9", "10", ... up to 4294967294)
 *     first in numeric order, then the others by UTF-16 code units (ties keep dict order);
 *   - numbers: every int goes through a double; ECMAScript Number::toString layout of the
 *     shortest round-trip digits (CPython's repr digits); NaN, Infinity, ints beyond the
 *     double range print null; -0 prints 0;
 *   - strings: JSON.stringify escaping (\" \\ \b \t \n \f \r, other C0 as \u00xx), the rest
 *     raw UTF-8, except code points D800-DFFF, escaped as lowercase \udxxx.
 * No Python code runs while a value is walked (only exact builtin types are visited).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Deeper values go to the Python path, so a hostile nesting cannot overflow the C stack. */
#define MAX_DEPTH 512
#define MAX_ARRAY_INDEX 4294967294ULL
#define TWO_53 9007199254740992.0

enum { OK = 0, FAILED = -1, UNSUPPORTED = 1 };

typedef struct {
    PyObject *bytes;
    char *p;
    Py_ssize_t len;
    Py_ssize_t cap;
} Buf;

static int buf_grow(Buf *b, Py_ssize_t extra)
{
    Py_ssize_t cap = b->cap;
    while (cap < b->len + extra) {
        if (cap > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return FAILED;
        }
        cap *= 2;
    }
    if (_PyBytes_Resize(&b->bytes, cap) < 0)
        return FAILED;
    b->p = PyBytes_AS_STRING(b->bytes);
    b->cap = cap;
    return OK;
}

static inline int buf_reserve(Buf *b, Py_ssize_t extra)
{
    return (b->len + extra <= b->cap) ? OK : buf_grow(b, extra);
}

static inline int buf_write(Buf *b, const char *s, Py_ssize_t n)
{
    if (buf_reserve(b, n) < 0)
        return FAILED;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return OK;
}

static inline void put(Buf *b, char c) { b->p[b->len++] = c; }

/* ---- strings ---------------------------------------------------------------------------- */

static const char HEX[] = "0123456789abcdef";

/* Whether ASCII code point c needs an escape: C0 controls, '"' and '\\'. */
static inline int needs_escape(Py_UCS4 c) { return c < 0x20 || c == '"' || c == '\\'; }

/* Writes the escape of c (a C0 control, '"', '\\' or a surrogate); room for 6 bytes reserved. */
static inline void put_escape(Buf *b, Py_UCS4 c)
{
    put(b, '\\');
    switch (c) {
    case '"': put(b, '"'); return;
    case '\\': put(b, '\\'); return;
    case '\b': put(b, 'b'); return;
    case '\t': put(b, 't'); return;
    case '\n': put(b, 'n'); return;
    case '\f': put(b, 'f'); return;
    case '\r': put(b, 'r'); return;
    default:
        put(b, 'u');
        put(b, HEX[(c >> 12) & 0xF]);
        put(b, HEX[(c >> 8) & 0xF]);
        put(b, HEX[(c >> 4) & 0xF]);
        put(b, HEX[c & 0xF]);
    }
}

static int write_ascii(Buf *b, const Py_UCS1 *s, Py_ssize_t n)
{
    Py_ssize_t start = 0;
    if (buf_reserve(b, n + 2) < 0)
        return FAILED;
    put(b, '"');
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!needs_escape(s[i]))
            continue;
        /* room: the run so far, the escape, the rest unescaped and the closing quote */
        if (buf_reserve(b, (i - start) + 6 + (n - i) + 1) < 0)
            return FAILED;
        memcpy(b->p + b->len, s + start, i - start);
        b->len += i - start;
        put_escape(b, s[i]);
        start = i + 1;
    }
    if (buf_reserve(b, (n - start) + 1) < 0)
        return FAILED;
    memcpy(b->p + b->len, s + start, n - start);
    b->len += n - start;
    put(b, '"');
    return OK;
}

/* The UTF-8 of code point c (not a surrogate, not needing an escape); room reserved. */
static inline void put_utf8(Buf *b, Py_UCS4 c)
{
    if (c < 0x80) {
        put(b, (char)c);
    } else if (c < 0x800) {
        put(b, (char)(0xC0 | (c >> 6)));
        put(b, (char)(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
        put(b, (char)(0xE0 | (c >> 12)));
        put(b, (char)(0x80 | ((c >> 6) & 0x3F)));
        put(b, (char)(0x80 | (c & 0x3F)));
    } else {
        put(b, (char)(0xF0 | (c >> 18)));
        put(b, (char)(0x80 | ((c >> 12) & 0x3F)));
        put(b, (char)(0x80 | ((c >> 6) & 0x3F)));
        put(b, (char)(0x80 | (c & 0x3F)));
    }
}

/* One loop per string kind (the compiler specialises each; PyUnicode_READ would branch on the
 * kind for every code point), over blocks of BLOCK code points: 4 bytes of UTF-8 at most per
 * code point, and an escape (6) only replaces a 1- or 3-byte one, so 6 bytes per code point of
 * a block always suffice, and a long string never reserves 6 times its length at once. */
#define BLOCK 4096
#define WRITE_WIDE(TYPE)                                                                   \
    do {                                                                                   \
        const TYPE *s = (const TYPE *)data;                                                \
        for (Py_ssize_t start = 0; start < n; start += BLOCK) {                            \
            Py_ssize_t end = n - start < BLOCK ? n : start + BLOCK;                        \
            if (buf_reserve(b, 6 * (end - start) + 1) < 0)                                 \
                return FAILED;                                                             \
            for (Py_ssize_t i = start; i < end; i++) {                                     \
                Py_UCS4 c = s[i];                                                          \
                if (c < 0x80 ? needs_escape(c) : (c >= 0xD800 && c <= 0xDFFF))             \
                    put_escape(b, c);                                                      \
                else                                                                       \
                    put_utf8(b, c);                                                        \
            }                                                                              \
        }                                                                                  \
    } while (0)

static int write_string(Buf *b, PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (PyUnicode_IS_ASCII(s))
        return write_ascii(b, PyUnicode_1BYTE_DATA(s), n);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    if (buf_reserve(b, 1) < 0)
        return FAILED;
    put(b, '"');
    if (kind == PyUnicode_1BYTE_KIND)
        WRITE_WIDE(Py_UCS1);
    else if (kind == PyUnicode_2BYTE_KIND)
        WRITE_WIDE(Py_UCS2);
    else
        WRITE_WIDE(Py_UCS4);
    if (buf_reserve(b, 1) < 0)
        return FAILED;
    put(b, '"');
    return OK;
}

/* ---- numbers ---------------------------------------------------------------------------- */

static int write_int64(Buf *b, long long v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", v);
    return buf_write(b, tmp, n);
}

/* ECMAScript Number::toString of a finite, non-zero double that is not a small integer, from
 * the digits of CPython's repr (shortest round trip): js_number in canonical.py, branch by
 * branch. */
static int write_double_digits(Buf *b, double x)
{
    char *r = PyOS_double_to_string(fabs(x), 'r', 0, 0, NULL);
    if (r == NULL)
        return FAILED;
    char *e = strchr(r, 'e');
    long exp = e ? strtol(e + 1, NULL, 10) : 0;
    size_t mant_len = e ? (size_t)(e - r) : strlen(r);
    char *dot = memchr(r, '.', mant_len);
    size_t int_len = dot ? (size_t)(dot - r) : mant_len;
    const char *frac = dot ? dot + 1 : r + mant_len;
    size_t frac_len = dot ? mant_len - int_len - 1 : 0;

    char digits[64];
    size_t k = 0;
    int leading = 1;
    for (size_t i = 0; i < mant_len; i++) {
        if (r[i] == '.')
            continue;
        if (leading && r[i] == '0')
            continue;
        leading = 0;
        if (k < sizeof digits)
            digits[k++] = r[i];
    }
    long point = (long)int_len + exp;
    if (int_len == 1 && r[0] == '0') {
        size_t zeros = 0;
        while (zeros < frac_len && frac[zeros] == '0')
            zeros++;
        point = exp - (long)zeros;
    }
    PyMem_Free(r);
    while (k > 0 && digits[k - 1] == '0')
        k--;
    if (k == 0)
        digits[k++] = '0';

    char out[128];
    size_t n = 0;
    if (x < 0)
        out[n++] = '-';
    if ((long)k <= point && point <= 21) {
        memcpy(out + n, digits, k);
        n += k;
        for (long i = (long)k; i < point; i++)
            out[n++] = '0';
    } else if (0 < point && point <= 21) {
        memcpy(out + n, digits, point);
        n += point;
        out[n++] = '.';
        memcpy(out + n, digits + point, k - point);
        n += k - point;
    } else if (-6 < point && point <= 0) {
        out[n++] = '0';
        out[n++] = '.';
        for (long i = 0; i < -point; i++)
            out[n++] = '0';
        memcpy(out + n, digits, k);
        n += k;
    } else {
        long ex = point - 1;
        out[n++] = digits[0];
        if (k > 1) {
            out[n++] = '.';
            memcpy(out + n, digits + 1, k - 1);
            n += k - 1;
        }
        n += snprintf(out + n, sizeof out - n, ex >= 0 ? "e+%ld" : "e-%ld", ex >= 0 ? ex : -ex);
    }
    return buf_write(b, out, (Py_ssize_t)n);
}

static int write_double(Buf *b, double x)
{
    if (!isfinite(x))
        return buf_write(b, "null", 4);
    if (x == 0)
        return buf_write(b, "0", 1);
    if (fabs(x) < TWO_53 && x == floor(x))
        return write_int64(b, (long long)x);
    return write_double_digits(b, x);
}

static int write_long(Buf *b, PyObject *v)
{
    int overflow = 0;
    long long n = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (n == -1 && PyErr_Occurred())
        return FAILED;
    if (!overflow && n > -(1LL << 53) && n < (1LL << 53))
        return write_int64(b, n);
    double x = PyLong_AsDouble(v);
    if (x == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return FAILED;
        PyErr_Clear(); /* beyond the double range: JavaScript's Infinity */
        return buf_write(b, "null", 4);
    }
    return write_double(b, x);
}

/* ---- objects and arrays ----------------------------------------------------------------- */

typedef struct {
    PyObject *key;
    PyObject *value;
    unsigned long long index; /* numeric value of an array-index key */
    int is_index;
    Py_ssize_t pos;           /* dict order, for ties */
} Member;

/* "0" or [1-9][0-9]* (ASCII digits) no larger than 4294967294. */
static int array_index(PyObject *key, unsigned long long *out)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(key);
    if (n == 0 || n > 10 || !PyUnicode_IS_ASCII(key))
        return 0;
    const Py_UCS1 *s = PyUnicode_1BYTE_DATA(key);
    if (s[0] == '0' && n > 1)
        return 0;
    unsigned long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    if (v > MAX_ARRAY_INDEX)
        return 0;
    *out = v;
    return 1;
}

typedef struct {
    int kind;
    const void *data;
    Py_ssize_t len;
    Py_ssize_t i;
    Py_UCS4 pending; /* the low surrogate still to yield, or 0 */
} Utf16;

/* The next UTF-16 code unit of the string, or -1 at its end. */
static inline long utf16_next(Utf16 *it)
{
    if (it->pending) {
        long c = it->pending;
        it->pending = 0;
        return c;
    }
    if (it->i >= it->len)
        return -1;
    Py_UCS4 c = PyUnicode_READ(it->kind, it->data, it->i++);
    if (c >= 0x10000) {
        c -= 0x10000;
        it->pending = 0xDC00 + (c & 0x3FF);
        return 0xD800 + (c >> 10);
    }
    return c;
}

static int utf16_compare(PyObject *a, PyObject *b)
{
    int ka = PyUnicode_KIND(a), kb = PyUnicode_KIND(b);
    Py_ssize_t na = PyUnicode_GET_LENGTH(a), nb = PyUnicode_GET_LENGTH(b);
    if (ka == PyUnicode_1BYTE_KIND && kb == PyUnicode_1BYTE_KIND) {
        /* Latin-1: code points are code units */
        int c = memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), na < nb ? na : nb);
        if (c)
            return c;
        return (na > nb) - (na < nb);
    }
    Utf16 ia = {ka, PyUnicode_DATA(a), na, 0, 0};
    Utf16 ib = {kb, PyUnicode_DATA(b), nb, 0, 0};
    for (;;) {
        long ca = utf16_next(&ia), cb = utf16_next(&ib);
        if (ca != cb)
            return ca < cb ? -1 : 1; /* -1 (the end) sorts first */
        if (ca < 0)
            return 0;
    }
}

static int member_compare(const void *pa, const void *pb)
{
    const Member *a = pa, *b = pb;
    if (a->is_index != b->is_index)
        return a->is_index ? -1 : 1;
    int c;
    if (a->is_index)
        c = (a->index > b->index) - (a->index < b->index);
    else
        c = utf16_compare(a->key, b->key);
    if (c)
        return c;
    return (a->pos > b->pos) - (a->pos < b->pos);
}

static int encode(Buf *b, PyObject *v, int depth);

/* Writes known[key] (canonical JSON the caller already has) if key is there. */
static int write_known(Buf *b, PyObject *key, PyObject *known, int *written)
{
    PyObject *text = PyDict_GetItemWithError(known, key);
    *written = 0;
    if (text == NULL)
        return PyErr_Occurred() ? FAILED : OK;
    if (!PyBytes_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "dumps: known members must be bytes");
        return FAILED;
    }
    *written = 1;
    return buf_write(b, PyBytes_AS_STRING(text), PyBytes_GET_SIZE(text));
}

static int is_proto(PyObject *key)
{
    return PyUnicode_GET_LENGTH(key) == 9 && PyUnicode_IS_ASCII(key)
           && memcmp(PyUnicode_1BYTE_DATA(key), "__proto__", 9) == 0;
}

static int write_dict(Buf *b, PyObject *d, int depth, PyObject *known)
{
    Py_ssize_t n = PyDict_GET_SIZE(d);
    Member stack[32];
    Member *members = stack;
    if (n > 32) {
        members = PyMem_Malloc(sizeof(Member) * (size_t)n);
        if (members == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
    }
    Py_ssize_t count = 0, pos = 0;
    PyObject *key, *value;
    int rc = OK, sorted = 1;
    while (PyDict_Next(d, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key)) {
            rc = UNSUPPORTED;
            break;
        }
        if (is_proto(key))
            continue;
        Member *m = &members[count];
        m->key = key;
        m->value = value;
        m->pos = count;
        m->is_index = array_index(key, &m->index);
        if (count && sorted && member_compare(&members[count - 1], m) > 0)
            sorted = 0;
        count++;
    }
    if (rc == OK) {
        for (Py_ssize_t i = 0; i < count; i++) { /* held: nothing may free them mid-walk */
            Py_INCREF(members[i].key);
            Py_INCREF(members[i].value);
        }
        if (!sorted)
            qsort(members, (size_t)count, sizeof(Member), member_compare);
        rc = buf_write(b, "{", 1);
        for (Py_ssize_t i = 0; i < count && rc == OK; i++) {
            if (i)
                rc = buf_write(b, ",", 1);
            if (rc == OK)
                rc = write_string(b, members[i].key);
            if (rc == OK)
                rc = buf_write(b, ":", 1);
            int written = 0;
            if (rc == OK && known != NULL)
                rc = write_known(b, members[i].key, known, &written);
            if (rc == OK && !written)
                rc = encode(b, members[i].value, depth + 1);
        }
        if (rc == OK)
            rc = buf_write(b, "}", 1);
        for (Py_ssize_t i = 0; i < count; i++) {
            Py_DECREF(members[i].key);
            Py_DECREF(members[i].value);
        }
    }
    if (members != stack)
        PyMem_Free(members);
    return rc;
}

static int write_array(Buf *b, PyObject *seq, int depth)
{
    int rc = buf_write(b, "[", 1);
    for (Py_ssize_t i = 0; rc == OK; i++) {
        /* re-read each time: the length is the sequence's own, never a stale copy */
        Py_ssize_t n = PyList_CheckExact(seq) ? PyList_GET_SIZE(seq) : PyTuple_GET_SIZE(seq);
        if (i >= n)
            break;
        PyObject *item = PyList_CheckExact(seq) ? PyList_GET_ITEM(seq, i)
                                                : PyTuple_GET_ITEM(seq, i);
        if (i)
            rc = buf_write(b, ",", 1);
        if (rc != OK)
            break;
        Py_INCREF(item);
        rc = encode(b, item, depth + 1);
        Py_DECREF(item);
    }
    if (rc == OK)
        rc = buf_write(b, "]", 1);
    return rc;
}

static int encode(Buf *b, PyObject *v, int depth)
{
    if (depth > MAX_DEPTH)
        return UNSUPPORTED;
    if (v == Py_None)
        return buf_write(b, "null", 4);
    if (v == Py_True)
        return buf_write(b, "true", 4);
    if (v == Py_False)
        return buf_write(b, "false", 5);
    if (PyUnicode_CheckExact(v))
        return write_string(b, v);
    if (PyLong_CheckExact(v))
        return write_long(b, v);
    if (PyFloat_CheckExact(v))
        return write_double(b, PyFloat_AS_DOUBLE(v));
    if (PyDict_CheckExact(v))
        return write_dict(b, v, depth, NULL);
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v))
        return write_array(b, v, depth);
    return UNSUPPORTED;
}

static PyObject *dumps(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *value, *known = NULL;
    if (!PyArg_ParseTuple(args, "O|O!:dumps", &value, &PyDict_Type, &known))
        return NULL;
    Buf b = {PyBytes_FromStringAndSize(NULL, 256), NULL, 0, 256};
    if (b.bytes == NULL)
        return NULL;
    b.p = PyBytes_AS_STRING(b.bytes);
    int rc = (known != NULL && PyDict_CheckExact(value)) ? write_dict(&b, value, 0, known)
                                                          : encode(&b, value, 0);
    if (rc != OK) {
        Py_DECREF(b.bytes);
        if (rc == FAILED)
            return NULL;
        Py_RETURN_NONE;
    }
    if (_PyBytes_Resize(&b.bytes, b.len) < 0)
        return NULL;
    return b.bytes;
}

/* ---- depth ------------------------------------------------------------------------------ */

/* Whether v nests arrays/objects deeper than limit (v itself at depth `depth`): 1 yes, 0 no,
 * UNSUPPORTED_DEPTH for a subclass of dict or list (the Python walk decides those). Recursion
 * stops at limit + 1 levels, so the C stack stays bounded by the caller's limit. */
#define UNSUPPORTED_DEPTH 2

static int deeper_than(PyObject *v, long depth, long limit)
{
    if (depth > limit)
        return 1;
    if (PyDict_CheckExact(v)) {
        Py_ssize_t pos = 0;
        PyObject *key, *child;
        while (PyDict_Next(v, &pos, &key, &child)) {
            if (PyDict_Check(child) || PyList_Check(child)) {
                int rc = deeper_than(child, depth + 1, limit);
                if (rc)
                    return rc;
            }
        }
        return 0;
    }
    if (PyList_CheckExact(v)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v); i++) {
            PyObject *child = PyList_GET_ITEM(v, i);
            if (PyDict_Check(child) || PyList_Check(child)) {
                int rc = deeper_than(child, depth + 1, limit);
                if (rc)
                    return rc;
            }
        }
        return 0;
    }
    return UNSUPPORTED_DEPTH;
}

static PyObject *too_deep(PyObject *module, PyObject *args)
{
    (void)module;
    PyObject *value;
    long limit;
    if (!PyArg_ParseTuple(args, "Ol:too_deep", &value, &limit))
        return NULL;
    if (limit < 0 || limit > MAX_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "too_deep: limit out of range");
        return NULL;
    }
    int rc = deeper_than(value, 1, limit);
    if (rc == UNSUPPORTED_DEPTH)
        Py_RETURN_NONE;
    return PyBool_FromLong(rc);
}

/* The widest integers orjson reads exactly: -2**63 and 2**64 - 1, as decimal digits. */
static const char MOST_NEGATIVE[] = "9223372036854775808";
static const char MOST_POSITIVE[] = "18446744073709551615";

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Whether the digits of an integer literal (sign apart) are beyond its sign's bound. */
static int beyond_64_bits(const unsigned char *digits, Py_ssize_t n, int negative)
{
    while (n > 1 && digits[0] == '0') {
        digits++;
        n--;
    }
    const char *bound = negative ? MOST_NEGATIVE : MOST_POSITIVE;
    Py_ssize_t width = (Py_ssize_t)strlen(bound);
    if (n != width)
        return n > width;
    return memcmp(digits, bound, (size_t)width) > 0;
}

/* Whether text holds, outside string literals, an integer literal (no fraction, no exponent)
 * beyond 64 bits. The scan is the twin of canonical.py's _JSON_TOKENS regex read left to
 * right: a '"' opens a string that runs to the next '"' not escaped by a backslash, or to the
 * end of the text; a number is -?digits, then .digits, then [eE][+-]?digits, each of the last
 * two taken only when complete. Linear in the text. */
static int holds_wide_integer(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c == '"') {
            Py_ssize_t j = i + 1;
            while (j < n && s[j] != '"')
                j += s[j] == '\\' ? 2 : 1;
            i = j + 1;  /* past the closing quote, or past the end: an open string */
            continue;
        }
        int negative = c == '-' && i + 1 < n && is_digit(s[i + 1]);
        if (negative)
            i++;
        else if (!is_digit(c)) {
            i++;
            continue;
        }
        Py_ssize_t start = i;
        while (i < n && is_digit(s[i]))
            i++;
        Py_ssize_t digits = i - start;
        int integer = 1;
        if (i + 1 < n && s[i] == '.' && is_digit(s[i + 1])) {
            integer = 0;
            for (i += 1; i < n && is_digit(s[i]); i++)
                ;
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
            Py_ssize_t k = i + 1;
            if (k < n && (s[k] == '+' || s[k] == '-'))
                k++;
            if (k < n && is_digit(s[k])) {
                integer = 0;
                for (i = k; i < n && is_digit(s[i]); i++)
                    ;
            }
        }
        if (integer && beyond_64_bits(s + start, digits, negative))
            return 1;
    }
    return 0;
}

static PyObject *wide_integer(PyObject *module, PyObject *args)
{
    (void)module;
    Py_buffer text;
    if (!PyArg_ParseTuple(args, "y*:wide_integer", &text))
        return NULL;
    int found;
    Py_BEGIN_ALLOW_THREADS
    found = holds_wide_integer((const unsigned char *)text.buf, text.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&text);
    return PyBool_FromLong(found);
}

static PyMethodDef methods[] = {
    {"dumps", dumps, METH_VARARGS,
     "dumps(value, known=None) -> bytes | None\n\naioc's canonical JSON of a JSON-sourced "
     "value, UTF-8 encoded; None when the value needs the Python path (subclasses, other "
     "types, deep nesting). known: for a dict value, {key: bytes} of members whose canonical "
     "JSON is already known (written as given)."},
    {"too_deep", too_deep, METH_VARARGS,
     "too_deep(value, limit) -> bool | None\n\nWhether a JSON-sourced list or dict nests "
     "lists/dicts more than limit levels deep (the value itself is level 1); None when the "
     "value is not an exact list or dict or holds a subclass of one (the Python walk decides)."},
    {"wide_integer", wide_integer, METH_VARARGS,
     "wide_integer(text) -> bool\n\nWhether UTF-8 JSON text (any bytes-like object) holds, "
     "outside string literals, an integer literal below -2**63 or above 2**64 - 1: one orjson "
     "reads as a float."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "recstore._canonical",
    "aioc's canonical JSON in C (see recstore.canonical).", -1, methods,
};

PyMODINIT_FUNC PyInit__canonical(void) { return PyModule_Create(&module); }
