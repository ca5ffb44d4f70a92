"""Invented values for the adversarial corpus: account numbers, people, addresses, hosts,
passwords, amounts and dates, each drawn from a seeded `random.Random` so that every stream
gets values of its own and no two streams share a string a policy could learn.

Nothing here is taken from the AgentDojo corpus's attacks; the pools are made up for this
corpus. Every generator returns the value as the agent would pass it to a tool and, where the
text of an injected instruction would write it differently, the written form as well."""

import string

# --- people -------------------------------------------------------------------------------

FIRST = [
    "Aaliyah", "Bastien", "Camila", "Dmitri", "Elif", "Farid", "Greta", "Hiroshi", "Ines",
    "Jonas", "Kaveh", "Leonie", "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa",
    "Soren", "Tamsin", "Umar", "Valentina", "Wendell", "Ximena", "Yusuf", "Zofia", "Anouk",
    "Bram", "Chiara", "Desmond", "Esme", "Florin", "Gideon", "Hana", "Idris", "Juno",
    "Kasimir", "Lucia", "Malik", "Noor", "Orla", "Pavel", "Rahel", "Stellan", "Thea",
]
LAST = [
    "Abernathy", "Bergstrom", "Castellanos", "Delacroix", "Eriksen", "Fairbanks", "Galloway",
    "Hargreaves", "Iwasaki", "Jablonski", "Kowalczyk", "Lindqvist", "Marchetti", "Novak",
    "Okafor", "Pemberton", "Quispe", "Rautenberg", "Szabo", "Thornbury", "Uribe", "Vasquez",
    "Whitlock", "Yilmaz", "Zimmer", "Achterberg", "Brannigan", "Cardoso", "Dunleavy",
    "Esposito", "Falkner", "Greaves", "Haddad", "Ivanova", "Jovanovic", "Kerrigan", "Lafleur",
    "Mendoza", "Nakamura", "Oyelaran", "Petrakis", "Rasmussen", "Sandoval", "Tremblay",
]

MAIL_DOMAINS = [
    "gmail.com", "outlook.com", "proton.me", "yahoo.co.uk", "gmx.de", "icloud.com",
    "fastmail.com", "mail.com", "hey.com", "zoho.eu", "posteo.net", "web.de", "aol.com",
    "tutanota.com", "hotmail.fr", "libero.it", "seznam.cz", "laposte.net",
]
# Word parts for made-up company and web hosts.
HOST_A = [
    "north", "clear", "bright", "silver", "harbor", "summit", "quill", "copper", "lumen",
    "maple", "vertex", "tidal", "amber", "cobalt", "meadow", "granite", "falcon", "orbit",
    "pine", "ridge", "atlas", "ember", "juniper", "kestrel", "nimbus", "onyx", "prairie",
]
HOST_B = [
    "ledger", "desk", "works", "point", "labs", "hub", "gate", "bridge", "line", "stack",
    "vault", "field", "forge", "sync", "path", "base", "cloud", "port", "mark", "flow",
]
TLDS = ["com", "io", "net", "co", "eu", "app", "org", "dev", "info", "biz", "co.uk", "de", "fr"]


def person(rng):
    return rng.choice(FIRST), rng.choice(LAST)


def company(rng):
    a, b = rng.choice(HOST_A), rng.choice(HOST_B)
    style = rng.randrange(4)
    if style == 0:
        return f"{a}{b}.{rng.choice(TLDS)}"
    if style == 1:
        return f"{a}-{b}.{rng.choice(TLDS)}"
    if style == 2:
        return f"{a}{b}{rng.randrange(2, 99)}.{rng.choice(TLDS)}"
    return f"{b}-{a}-{rng.choice(['group', 'partners', 'services', 'corp'])}.{rng.choice(TLDS)}"


def email(rng, first=None, last=None):
    """A made-up address: personal (first.last@webmail) or at a made-up company."""
    if first is None:
        first, last = person(rng)
    f, l_ = first.lower(), last.lower()
    local = rng.choice([
        f"{f}.{l_}", f"{f[0]}{l_}", f"{f}_{l_}{rng.randrange(1, 99)}", f"{f}{rng.randrange(70, 2005)}",
        f"{l_}.{f[0]}", f"{f}-{l_}", f"{f}.{l_[0]}{rng.randrange(10, 99)}",
        rng.choice(["billing", "accounts", "support", "office", "admin", "payroll", "travel",
                    "bookings", "hr", "it-helpdesk", "finance", "noreply-verify"]),
    ])
    domain = rng.choice(MAIL_DOMAINS) if rng.random() < 0.55 else company(rng)
    return f"{local}@{domain}"


def slack_handle(rng):
    first, last = person(rng)
    return rng.choice([first, f"{first}{last[0]}", f"{first}.{last}", f"{first}_{last[:3]}"])


# --- bank accounts -------------------------------------------------------------------------

# Country code, length of the account part after the check digits, and a shape for it:
# `n` a digit, `a` an upper-case letter, `c` either.
IBAN_SHAPES = [
    ("DE", "nnnnnnnnnnnnnnnnnn"), ("FR", "nnnnnnnnnnaaaaaaaaaaann"), ("GB", "aaaannnnnnnnnnnnnn"),
    ("ES", "nnnnnnnnnnnnnnnnnnnn"), ("IT", "annnnnnnnnnccccccccccccc"), ("NL", "aaaannnnnnnnnn"),
    ("BE", "nnnnnnnnnnnn"), ("AT", "nnnnnnnnnnnnnnnn"), ("CH", "nnnnnccccccccccccc"),
    ("PL", "nnnnnnnnnnnnnnnnnnnnnnnn"), ("PT", "nnnnnnnnnnnnnnnnnnnnn"), ("IE", "aaaannnnnnnnnnnnnn"),
    ("LT", "nnnnnnnnnnnnnnnn"), ("DK", "nnnnnnnnnnnnnn"), ("FI", "nnnnnnnnnnnnnn"),
    ("CZ", "nnnnnnnnnnnnnnnnnnnn"), ("HU", "nnnnnnnnnnnnnnnnnnnnnnnn"), ("LU", "nnnccccccccccccc"),
    ("SI", "nnnnnnnnnnnnnnn"), ("HR", "nnnnnnnnnnnnnnnnn"), ("RO", "aaaacccccccccccccccc"),
]


def _iban_check(country, bban):
    digits = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    return f"{98 - int(digits) % 97:02d}"


def iban(rng):
    """A made-up IBAN with valid check digits. Returns (compact, written): the written form is
    grouped in fours about half of the time, as people print them."""
    country, shape = rng.choice(IBAN_SHAPES)
    up = string.ascii_uppercase
    bban = "".join(
        rng.choice(string.digits) if s == "n" else rng.choice(up) if s == "a"
        else rng.choice(string.digits + up) for s in shape
    )
    compact = country + _iban_check(country, bban) + bban
    grouped = " ".join(compact[i:i + 4] for i in range(0, len(compact), 4))
    return compact, (grouped if rng.random() < 0.5 else compact)


# --- money, dates, passwords, places -----------------------------------------------------

def amount(rng, lo, hi, cents=True):
    """(value as the agent passes it, written form in the instruction)."""
    v = round(rng.uniform(lo, hi), 2 if cents and rng.random() < 0.5 else 0)
    v = float(v)
    whole, frac = int(v), round((v - int(v)) * 100)
    style = rng.randrange(7)
    if style == 0:
        txt = f"€{whole:,}.{frac:02d}"
    elif style == 1:
        txt = f"{v:.2f} EUR"
    elif style == 2:
        txt = f"USD {whole:,}" + (f".{frac:02d}" if frac else "")
    elif style == 3:
        txt = f"{whole:,}".replace(",", ".") + f",{frac:02d} €"
    elif style == 4:
        txt = f"${whole:,}.{frac:02d}"
    elif style == 5:
        txt = f"{v:g}"
    else:
        txt = f"£{whole}" + (f".{frac:02d}" if frac else "")
    return v, txt


MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August",
          "September", "October", "November", "December"]


def day(rng, years=(2024, 2025)):
    """A date as (ISO value, written form)."""
    y = rng.choice(years)
    m = rng.randrange(1, 13)
    d = rng.randrange(1, 29)
    iso = f"{y:04d}-{m:02d}-{d:02d}"
    style = rng.randrange(6)
    suffix = "th" if 11 <= d <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(d % 10, "th")
    written = [
        iso, f"{d} {MONTHS[m - 1]} {y}", f"{MONTHS[m - 1]} {d}{suffix}", f"{d:02d}/{m:02d}/{y}",
        f"{MONTHS[m - 1][:3]} {d}, {y}", f"the {d}{suffix} of {MONTHS[m - 1]}",
    ][style]
    return iso, written


def add_days(iso, n):
    import datetime
    d = datetime.date.fromisoformat(iso) + datetime.timedelta(days=n)
    return d.isoformat()


def clock(rng, lo=7, hi=21):
    h = rng.randrange(lo, hi)
    mm = rng.choice([0, 0, 15, 30, 45])
    iso = f"{h:02d}:{mm:02d}"
    written = rng.choice([iso, f"{(h - 1) % 12 + 1}:{mm:02d} {'am' if h < 12 else 'pm'}",
                          f"{h}h{mm:02d}" if mm else f"{h}h"])
    return iso, written


WORDS = ["otter", "lantern", "cobalt", "meadow", "pickle", "harbor", "violet", "quartz",
         "tundra", "mango", "saddle", "ripple", "falcon", "biscuit", "canyon", "juniper"]


def password(rng):
    style = rng.randrange(5)
    if style == 0:
        return rng.choice(["Spring", "Autumn", "Winter", "Summer", "Harbor", "Phoenix"]) + \
            str(rng.randrange(2019, 2026)) + rng.choice("!#$%&*?")
    if style == 1:
        return "".join(rng.choice(string.ascii_letters + string.digits + "!#%&*") for _ in range(rng.randrange(10, 15)))
    if style == 2:
        return "-".join(rng.sample(WORDS, 3)) + "-" + str(rng.randrange(10, 99))
    if style == 3:
        w = rng.choice(WORDS)
        return w[0].upper() + w[1:].replace("o", "0").replace("a", "@") + str(rng.randrange(100, 999))
    return f"{rng.choice(string.ascii_uppercase)}{rng.randrange(1000, 9999)}-{rng.choice(WORDS)}"


STREETS = ["Linden Avenue", "Harbour Road", "Rue des Tanneurs", "Calle del Olivo", "Birch Lane",
           "Kastanienallee", "Via Garibaldi", "Mill Street", "Quai de la Loire", "Rosemary Court",
           "Elmstraat", "Station Parade", "Weaver's Row", "Chemin des Vignes", "Aspen Drive"]
CITIES = ["Rotterdam", "Lyon", "Leeds", "Porto", "Gdansk", "Bilbao", "Graz", "Aarhus", "Cork",
          "Tallinn", "Bologna", "Ghent", "Brno", "Tampere", "Lille", "Dundee", "Toledo", "Malmo"]


def street(rng):
    n = rng.randrange(1, 240)
    s = rng.choice(STREETS)
    form = rng.randrange(3)
    if form == 0:
        return f"{n} {s}"
    if form == 1:
        return f"{s} {n}"
    return f"{s} {n}, apt {rng.randrange(1, 40)}"


def city(rng):
    return rng.choice(CITIES)


# --- hosts and web addresses ---------------------------------------------------------------

def host(rng):
    h = company(rng)
    return rng.choice([h, "www." + h, rng.choice(["portal.", "app.", "secure.", "docs.", "my."]) + h])


def url(rng):
    h = host(rng)
    path = rng.choice(["", "/login", "/verify", f"/r/{rng.randrange(1000, 99999)}", "/update-details",
                       f"/s/{''.join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(6))}",
                       "/account/confirm", "/benefits"])
    scheme = rng.choice(["https://", "http://", ""])
    return f"{scheme}{h}{path}"


# --- travel places (new ones, not in the suite's listings) -----------------------------------

HOTEL_A = ["Lumière", "Kensal", "Hollow Oak", "Saint-Clair", "Marlowe", "Azur", "Belvoir",
           "Ivy Gate", "Corniche", "Redbrick", "Glasshouse", "Old Quay", "Tamarind", "Rivoli"]
HOTEL_B = ["Suites", "Lodge", "House", "Residence", "Rooms", "Hotel & Spa", "Inn", "Apartments"]
RESTO_A = ["Chez", "La Table de", "Osteria", "Maison", "Brasserie", "Kitchen", "Bistro"]
RESTO_B = ["Margaux", "Ferrand", "Nonna Lia", "Sakura", "Bellamy", "Odette", "Le Tilleul",
           "Paloma", "Tiago", "Anselme", "Kasbah", "Wren"]
CARS_A = ["Velo", "Prime", "Metro", "Blue Coast", "Skyline", "Orbit", "Easy", "Open Road"]
CARS_B = ["Car Hire", "Rentals", "Auto Rent", "Drive", "Mobility", "Wheels"]


def hotel_name(rng):
    return f"{rng.choice(HOTEL_A)} {rng.choice(HOTEL_B)}"


def restaurant_name(rng):
    return f"{rng.choice(RESTO_A)} {rng.choice(RESTO_B)}"


def car_company(rng):
    return f"{rng.choice(CARS_A)} {rng.choice(CARS_B)}"


def reference(rng):
    return rng.choice([
        f"INV-{rng.randrange(1000, 9999)}", f"REF {rng.randrange(100000, 999999)}",
        f"{rng.choice(string.ascii_uppercase)}{rng.choice(string.ascii_uppercase)}-{rng.randrange(10, 99)}-{rng.randrange(1000, 9999)}",
        f"Case #{rng.randrange(10000, 99999)}", f"order {rng.randrange(3000000, 9999999)}",
    ])
