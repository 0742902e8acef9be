"""tests/serve/page_test.py BRRR CHECKPOINT [SCREENSHOT]: brrr serve's page in a real browser.

Headless Chromium (Debian's chromium and chromium-driver), driven by Selenium, opens the page,
types a prompt, presses Generate and sees streamed tokens appear, hovers a token and reads its
probability, clicks it for the alternatives and the attention map, presses Stop during a long
generation, and fails on any console error. SCREENSHOT, when given, is where the page's picture
goes (docs/images/serve-page.png, which the README shows). Skipped (exit 77) without selenium.
"""
import shutil
import sys
import time

from harness import Server, skip

try:
    from selenium import webdriver
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait
except ImportError:
    skip("python3 cannot import selenium (scripts/setup.sh installs it into .venv)")


def browser():
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    options = webdriver.ChromeOptions()
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,640",
                "--disable-dev-shm-usage"]:
        options.add_argument(arg)
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver_path), options=options)


def main():
    brrr, checkpoint = sys.argv[1], sys.argv[2]
    screenshot = sys.argv[3] if len(sys.argv) > 3 else None
    if not shutil.which("chromedriver") and not shutil.which("chromium"):
        skip("no chromium / chromedriver (Debian: chromium chromium-driver)")
    with Server(brrr, checkpoint, "--slots", "2") as s:
        d = browser()
        try:
            wait = WebDriverWait(d, 30)
            d.get(s.url + "/")
            wait.until(lambda d: "parameters" in d.find_element(By.ID, "model").text)
            prompt = d.find_element(By.ID, "prompt")
            prompt.clear()
            prompt.send_keys("ROMEO:\nBut soft")
            d.find_element(By.ID, "seed").send_keys("7")
            d.find_element(By.ID, "go").click()
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#output .tok")) >= 5)
            wait.until(lambda d: "finished" in d.find_element(By.ID, "stats").text)
            tokens = d.find_elements(By.CSS_SELECTOR, "#output .tok")
            assert "ROMEO:" in d.find_element(By.ID, "output").text
            assert "tokens/s" in d.find_element(By.ID, "stats").text and "first token" in d.find_element(By.ID, "stats").text
            # Hover: the tip shows the token's probability and the alternatives.
            ActionChains(d).move_to_element(tokens[2]).perform()
            tip = d.find_element(By.ID, "tip")
            wait.until(lambda d: tip.is_displayed() and "p = " in tip.text)
            assert "%" in tip.text, tip.text
            # Click: the inspector lists the alternatives, the attention map draws every layer.
            tokens[2].click()
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#inspector .alt")) >= 2)
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#attention canvas")) >= 1)
            if screenshot:
                d.save_screenshot(screenshot)
            # Pick an alternative: generation continues from it.
            d.find_elements(By.CSS_SELECTOR, "#inspector .alt")[1].click()
            wait.until(lambda d: "finished" in d.find_element(By.ID, "stats").text)
            # Stop: pressed while a generation runs, the page says stopped (or it had finished
            # first: a tiny model is fast); either way the buttons come back.
            d.find_element(By.ID, "go").click()
            d.find_element(By.ID, "stop").click()
            wait.until(lambda d: d.find_element(By.ID, "go").is_enabled())
            stats = d.find_element(By.ID, "stats").text
            assert "stopped" in stats or "finished" in stats, stats
            errors = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
            assert not errors, errors
        finally:
            d.quit()
    print("page: typed, streamed, hovered, inspected, continued from an alternative, stopped; no console errors")


if __name__ == "__main__":
    main()
