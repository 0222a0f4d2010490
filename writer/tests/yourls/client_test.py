"""YOURLS' own published Python client (`yourls`, pinned in
requirements.txt) against the writer's yourls-api.php, and the links it
makes followed through Varnish. The integration suite runs it with its
servers:
  YOURLS_API  the writer's yourls-api.php
  SIGNATURE   the YOURLS signature of a token no other test uses
  OTHER_SIGNATURE  another token's
  VARNISH     Varnish's host:port, where the short URLs are followed
  RUN         a word of this run's own, so that its links are new
"""
import http.client
import os
import time
import unittest
from urllib.parse import urlsplit

from yourls import YOURLSClient, YOURLSHTTPError

API = os.environ["YOURLS_API"]
RUN = os.environ["RUN"]
VARNISH = os.environ["VARNISH"]
client = YOURLSClient(API, signature=os.environ["SIGNATURE"])
other = YOURLSClient(API, signature=os.environ["OTHER_SIGNATURE"])


def follow(short_url):
    """The status and Location of a short URL, asked of Varnish as a browser."""
    parts = urlsplit(short_url)
    connection = http.client.HTTPConnection(VARNISH, timeout=10)
    connection.request("GET", parts.path, headers={"Host": parts.netloc, "User-Agent": "Mozilla/5.0 (X11; Linux x86_64)"})
    answer = connection.getresponse()
    answer.read()
    connection.close()
    return answer.status, answer.getheader("Location")


def eventually(check, seconds=15):
    """`check()` once it holds, within `seconds`."""
    until = time.monotonic() + seconds
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() > until:
                raise
            time.sleep(0.25)


class TheClient(unittest.TestCase):
    def test_a_link_is_made_expanded_followed_and_counted(self):
        url = f"https://example.org/yourls/{RUN}/made"
        keyword = f"y-{RUN}"
        made = client.shorten(url, keyword=keyword, title="Made by YOURLS' client")
        self.assertEqual(made.url, url)
        self.assertEqual(made.keyword, keyword)
        self.assertEqual(made.title, "Made by YOURLS' client")
        self.assertTrue(made.shorturl.endswith("/" + keyword), made.shorturl)
        self.assertEqual(client.expand(made.shorturl), url)
        self.assertEqual(client.expand(keyword), url)
        self.assertEqual(follow(made.shorturl)[1], url)
        self.assertEqual(follow(made.shorturl)[1], url)

        def counted():
            stats = client.url_stats(made.shorturl)
            self.assertEqual(stats.clicks, 2)
            self.assertEqual(stats.url, url)
            return stats

        eventually(counted)
        db = client.db_stats()
        self.assertGreaterEqual(db.total_links, 1)
        self.assertGreaterEqual(db.total_clicks, 2)
        links, totals = client.stats("top", limit=1)
        self.assertEqual(totals.total_links, db.total_links)
        self.assertGreaterEqual(links[0].clicks, 2)
        newest, _ = client.stats("last", limit=1)
        self.assertTrue(newest[0].shorturl)

    def test_a_generated_keyword_and_the_refusals(self):
        url = f"https://example.org/yourls/{RUN}/generated"
        made = client.shorten(url)
        self.assertEqual(follow(made.shorturl), (301, url))
        # YOURLS 1.10 answers both with HTTP 400 (error:url, error:keyword),
        # which this client raises as an HTTP error.
        with self.assertRaises(YOURLSHTTPError):
            client.shorten(url)
        with self.assertRaises(YOURLSHTTPError):
            client.shorten(url + "/other", keyword=made.keyword)
        with self.assertRaises(YOURLSHTTPError):
            client.expand(f"nothing-{RUN}")
        # Another token's link: found by anyone, counted for its owner alone.
        self.assertEqual(other.expand(made.shorturl), url)
        with self.assertRaises(YOURLSHTTPError):
            other.url_stats(made.shorturl)
        with self.assertRaises(YOURLSHTTPError):
            YOURLSClient(API, signature="0" * 32).db_stats()


if __name__ == "__main__":
    unittest.main()
