-- Devices and languages as a link's visitors send them, for the `make bench`
-- scripts that spread their requests over visitors (links whose rules read
-- User-Agent and Accept-Language): an iPhone, Android phones, desktops of
-- several languages. Found through LUA_PATH, as figures.lua.

local visitors = { list = {
    { ["User-Agent"] = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
        .. "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", ["Accept-Language"] = "en-US,en;q=0.9" },
    { ["User-Agent"] = "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) "
        .. "Chrome/124.0 Mobile Safari/537.36", ["Accept-Language"] = "de-DE,de;q=0.9" },
    { ["User-Agent"] = "Mozilla/5.0 (Linux; Android 14; SM-S921B) AppleWebKit/537.36 (KHTML, like Gecko) "
        .. "Chrome/124.0 Mobile Safari/537.36", ["Accept-Language"] = "fr-FR,fr;q=0.9" },
    { ["Accept-Language"] = "fr-FR,fr;q=0.9,en;q=0.5" },
    { ["Accept-Language"] = "en-GB,en;q=0.9" },
    { ["User-Agent"] = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
        .. "Chrome/124.0 Safari/537.36", ["Accept-Language"] = "de-DE,de;q=0.9,en;q=0.8" },
    { ["User-Agent"] = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) "
        .. "Version/17.4 Safari/605.1.15", ["Accept-Language"] = "nl-NL,nl;q=0.9" },
    { ["User-Agent"] = "Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
        .. "(KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1", ["Accept-Language"] = "fr-CA" },
} }

-- The browser every request is sent as when not spread: most clicks are
-- people's, and only people's clicks go through the whole count (per day,
-- hour, minute, details, visitors) and make a link hot for warming.
visitors.browser = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

-- wrk.format sends the headers it is given instead of wrk.headers (Host
-- aside): completes each visitor's headers with `headers`' others.
function visitors.complete(headers)
    for _, visitor in ipairs(visitors.list) do
        for name, value in pairs(headers) do
            if visitor[name] == nil then
                visitor[name] = value
            end
        end
    end
end

return visitors
