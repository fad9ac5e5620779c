// The live page in headless Chromium: load it, submit a transfer, and see the update pushed over
// the WebSocket land on the page. Usage: node live-page.mjs URL SCREENSHOT.png
import { chromium } from 'playwright-core';

const [url, screenshot] = process.argv.slice(2);
if (!url || !screenshot) {
  console.error('usage: node live-page.mjs URL SCREENSHOT.png');
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage();
  page.setDefaultTimeout(20000);
  await page.goto(url);
  await page.waitForFunction(() => document.querySelector('#status')?.textContent === 'live');
  await page.waitForFunction(() => [...document.querySelectorAll('#accounts tr')].some((tr) => tr.dataset.id === 'alice'));
  await page.fill('input[name=from]', 'alice');
  await page.fill('input[name=to]', 'bob');
  await page.fill('input[name=amount]', '7.25');
  await page.click('button[type=submit]');
  await page.waitForFunction(() => document.querySelector('#answer')?.dataset.status === 'COMMITTED');
  // Pushed, not polled: the row changes when entity.committed arrives over the WebSocket.
  await page.waitForFunction(() => [...document.querySelectorAll('#accounts tr')]
    .some((tr) => tr.dataset.id === 'alice' && tr.children[1]?.textContent === '92.75'));
  await page.waitForFunction(() => [...document.querySelectorAll('#log li')]
    .some((li) => li.textContent.includes('transaction.completed') && li.textContent.includes('COMMITTED')));
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log('live page: transfer committed and pushed update shown');
} finally {
  await browser.close();
}
